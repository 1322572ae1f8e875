// Package registry keeps a fleet's modules and deployments in Kafka, so that
// every host of a consumer group runs the version deployed, whichever host
// the deploy reached.
//
// Three compacted topics of one partition each, named from a prefix
// (admin.registry_topic_prefix, default <kafka.group>.registry; the
// previous default's topics are kept where they hold the fleet's registry:
// prefix.go):
//
//   - <prefix>.modules: each module in chunks of ChunkBytes, key
//     "<sha256>/<index>/<count>"; a module is read back whole and checked
//     against its digest before use.
//   - <prefix>.deploys: key the pipeline's name, value a Deployment (the
//     digest deployed and the history before it). The latest record per
//     pipeline is what the fleet runs.
//   - <prefix>.hosts: key the host's id, value a HostStatus (what each of
//     its pipelines runs), written on each change and every
//     HeartbeatInterval; a host not heard of for LiveFor is not live.
//
// A deploy writes the module's chunks, then the deployment, both
// acknowledged by every in-sync replica; each host follows the deploys
// topic and applies what it reads (hot swap, as for a deploy on one host).
// Who may deploy is who may write these topics: the admin token on each
// host's API, and Kafka ACLs where the cluster has them (README).
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/verlabel"
	"github.com/wasmstream/wasmstream/scheduler/internal/kafkaerr"
)

const (
	// ChunkBytes is the size of a module's records: under the broker's
	// default message.max.bytes (1 MiB) with room for the batch.
	ChunkBytes = 512 << 10
	// HeartbeatInterval: how often a host writes its status.
	HeartbeatInterval = 5 * time.Second
	// LiveFor: a host whose status is older is not live.
	LiveFor = 3 * HeartbeatInterval
	// RecordTimeout bounds each write to the registry.
	RecordTimeout = 15 * time.Second
)

// Deployment is what a pipeline runs across the fleet.
type Deployment struct {
	Pipeline string    `json:"pipeline"`
	Digest   string    `json:"digest"`
	Label    string    `json:"label,omitempty"`   // the version's label (deploy --label; verlabel)
	Size     int       `json:"size,omitempty"`    // the module's bytes (0: not said, by an older host)
	History  []string  `json:"history,omitempty"` // earlier digests, oldest first
	At       time.Time `json:"at"`
	By       string    `json:"by"` // the host whose admin API took the deploy
	Rollback bool      `json:"rollback,omitempty"`
	// Canary runs another version on a share of the partitions; nil: none.
	Canary *Canary `json:"canary,omitempty"`
	// Aborted says why the last canary was aborted ("" if it was not), and
	// AbortedCanary which canary that was (nil from an older host): a
	// reader that never saw it run still knows what began and ended.
	Aborted       string  `json:"aborted,omitempty"`
	AbortedCanary *Canary `json:"aborted_canary,omitempty"`
}

// Canary is a version run on Percent of a pipeline's partitions.
type Canary struct {
	Digest  string    `json:"digest"`
	Label   string    `json:"label,omitempty"`
	Size    int       `json:"size,omitempty"`
	Percent int       `json:"percent"`
	At      time.Time `json:"at"`
}

// Registry is one host's view of the fleet's registry topics, and its
// writer. Safe for concurrent use. It owns one goroutine, which follows the
// deploys and hosts topics until Close, and while a deployment is applied
// one goroutine per pipeline that applies it (apply.go).
type Registry struct {
	Modules, Deploys, Hosts string // topic names
	host                    string
	// base are the options every client of the registry starts from
	// (seeds, client id, TLS, SASL: kafkaconn.Opts).
	base      []kgo.Opt
	maxModule int // admin.max_module_bytes: no module read is larger
	cl        *kgo.Client
	log       *slog.Logger

	mu        sync.Mutex // guards the fields below; a leaf lock
	deploys   map[string]Deployment
	deployAt  map[string]int64      // the offset of each pipeline's deployment read last
	hosts     map[string]HostStatus // at most MaxHosts (hosts.go)
	ignored   ignoredStatuses
	noneStale time.Time     // before it, every status kept is live (hosts.go)
	changed   chan struct{} // closed and replaced on every record read
	status    HostStatus
	apply     func(context.Context, Deployment)
	beat      func() // called on the registry's goroutine before each periodic status
	counts    func() map[string]map[string]Counts

	appliers appliers // apply.go
	pruner   pruner   // prune.go

	quit    chan struct{}
	done    chan struct{}
	started bool
}

// Config is where a registry lives and who this host is in it.
type Config struct {
	// Base are the options every client of the registry starts from:
	// seeds, client id, TLS and SASL (kafkaconn.Opts).
	Base []kgo.Opt
	// Prefix names the topics: <prefix>.modules, .deploys, .hosts
	// (admin.registry_topic_prefix).
	Prefix string
	// OldPrefix, with the default prefix, is the previous default's: its
	// topics are used while they exist and Prefix's do not (prefix.go).
	OldPrefix string
	// HostID is this host's key in the hosts topic (host.id).
	HostID string
	// MaxModuleBytes bounds what a module read from the registry may be
	// (admin.max_module_bytes): a deployment declaring a larger module is
	// refused before anything is read.
	MaxModuleBytes int
}

// Open creates the registry topics if missing (compacted, one partition,
// replicated up to 3), reads the deploys and hosts topics to their end and
// starts following them. apply is called for every deployment read after
// that; set it with OnDeploy before Start.
func Open(ctx context.Context, c Config, log *slog.Logger) (*Registry, error) {
	if c.MaxModuleBytes <= 0 {
		return nil, errors.New("admin.registry: admin.max_module_bytes must be set")
	}
	prefix, err := resolvePrefix(ctx, c, log)
	if err != nil {
		return nil, err
	}
	r := &Registry{Modules: prefix + ".modules", Deploys: prefix + ".deploys", Hosts: prefix + ".hosts", host: c.HostID, log: log,
		base: c.Base, maxModule: c.MaxModuleBytes,
		deploys: map[string]Deployment{}, deployAt: map[string]int64{}, hosts: map[string]HostStatus{}, changed: make(chan struct{}),
		status: HostStatus{Host: c.HostID, Pipelines: map[string]string{}, Failed: map[string]Failure{}},
		quit:   make(chan struct{}), done: make(chan struct{})}
	r.appliers.init()
	if err := r.createTopics(ctx); err != nil {
		return nil, explainDenied(err, prefix)
	}
	cl, err := kgo.NewClient(append(readOpts(r.base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			r.Deploys: {0: kgo.NewOffset().AtStart()},
			r.Hosts:   {0: kgo.NewOffset().AtStart()},
		}),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		// A write the brokers do not take within this fails (a deploy says
		// so; a status is written again at the next heartbeat) rather than
		// waiting forever, as kgo would by default.
		kgo.RecordDeliveryTimeout(RecordTimeout),
		kgo.ProducerBatchMaxBytes(ChunkBytes+64<<10))...)
	if err != nil {
		return nil, fmt.Errorf("admin.registry: %w", err)
	}
	r.cl = cl
	if err := r.catchUp(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return r, nil
}

// readOpts are the options of every client that reads the registry
// topics. Whoever may write them may do so in transactions (an
// exactly-once mirror of the registry from another cluster): reading
// committed records only, an aborted deployment is never applied, and
// keeping the control records (skipped by the readers), a reader sees the
// transaction markers' offsets and so reaches a partition's end when its
// last offset is a marker (readTo).
func readOpts(base []kgo.Opt) []kgo.Opt {
	return append(slices.Clip(base),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
}

func (r *Registry) createTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(r.base...)
	if err != nil {
		return fmt.Errorf("admin.registry: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("admin.registry: listing brokers: %w", err)
	}
	rf := int16(min(3, max(1, len(bs))))
	compact := "compact"
	for _, t := range []string{r.Modules, r.Deploys, r.Hosts} {
		cfg := map[string]*string{"cleanup.policy": &compact}
		if t == r.Modules {
			mb := strconv.Itoa(ChunkBytes + 64<<10)
			cfg["max.message.bytes"] = &mb
		}
		res, err := adm.CreateTopic(ctx, 1, rf, cfg, t)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("admin.registry: creating %s: %w", t, err)
		}
	}
	return nil
}

// ends lists the offsets up to which topics may be read now: under
// read_committed, the last stable offset (a transaction still open at the
// end is not waited for; what it commits is read when following). What
// the brokers say may pass is retried until ctx ends: topics created a
// moment ago are not known to every broker yet.
func ends(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]int64, error) {
	backoff := 50 * time.Millisecond
	for {
		ls, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
		if err == nil {
			err = ls.Error()
		}
		if err == nil {
			out := map[string]int64{}
			ls.Each(func(o kadm.ListedOffset) { out[o.Topic] = o.Offset })
			return out, nil
		}
		if !kerr.IsRetriable(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// readTo polls cl until every topic of want was read up to its offset
// there, handing each record that is not a control record to fn. Progress
// is the offset after the last record delivered, control records
// included: a partition whose last offset is a transaction marker is read
// to its end (before they were kept, its last data record stopped one
// short of the end, and the reader waited for a record that never came).
func readTo(ctx context.Context, cl *kgo.Client, want map[string]int64, fn func(*kgo.Record)) error {
	at := map[string]int64{}
	behind := func() bool {
		for t, end := range want {
			if at[t] < end {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := kafkaerr.FirstNonRetriable(fs); err != nil {
			return err
		}
		fs.EachRecord(func(rec *kgo.Record) {
			at[rec.Topic] = rec.Offset + 1
			if !rec.Attrs.IsControl() {
				fn(rec)
			}
		})
	}
	return nil
}

// catchUp reads the deploys and hosts topics up to their ends as of now.
func (r *Registry) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	want, err := ends(ctx, r.cl, r.Deploys, r.Hosts)
	if err != nil {
		return fmt.Errorf("admin.registry: %w", err)
	}
	if err := readTo(ctx, r.cl, want, func(rec *kgo.Record) { r.read(rec, false) }); err != nil {
		return fmt.Errorf("admin.registry: reading %s and %s: %w", r.Deploys, r.Hosts, err)
	}
	return nil
}

// OnDeploy sets the function called for each deployment read from now on.
// It is called on a goroutine of the deployment's pipeline, never two at
// once for one pipeline; ctx ends at Close. A deployment read while the
// pipeline's previous one is applied waits for it, and only the latest
// one waiting is applied: the fleet converges on the latest deployment
// (apply.go).
func (r *Registry) OnDeploy(apply func(ctx context.Context, d Deployment)) {
	r.mu.Lock()
	r.apply = apply
	r.mu.Unlock()
}

// OnHeartbeat sets counts, which the host's status reports on each
// heartbeat, and beat, called after each (both on the registry's
// goroutine); set them before Start.
func (r *Registry) OnHeartbeat(counts func() map[string]map[string]Counts, beat func()) {
	r.mu.Lock()
	r.counts, r.beat = counts, beat
	r.mu.Unlock()
}

// Start starts following the topics and writing the host's status.
func (r *Registry) Start() {
	r.started = true
	go r.follow()
}

// Close stops following, ends the applies in progress (their ctx) and
// waits for them, and closes the client.
func (r *Registry) Close() {
	select {
	case <-r.quit:
		return
	default:
	}
	close(r.quit)
	r.appliers.stop() // no new applies; those running see their ctx end
	if r.started {
		<-r.done // the poll ends at quit
	}
	r.appliers.wait()
	r.pruner.mu.Lock() // a pruneSoon that saw the registry open has added to wg
	r.pruner.mu.Unlock()
	r.pruner.wg.Wait() // its ctx ended with the appliers'
	r.cl.Close()
}

func (r *Registry) follow() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	r.publishStatus(ctx)
	// A poll ends by the next heartbeat's time, so that statuses are
	// written every HeartbeatInterval (plus the write), not up to twice
	// that as when a poll started just before a tick: other hosts count a
	// host live for LiveFor, three intervals. Nothing else runs on this
	// goroutine for long: deployments are applied on their own
	// goroutines, so a module read or a compile never delays a heartbeat.
	next := time.Now().Add(HeartbeatInterval)
	for {
		pctx, pcancel := context.WithDeadline(ctx, next)
		fs := r.cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if !rec.Attrs.IsControl() {
				r.read(rec, true)
			}
		})
		if time.Now().Before(next) {
			continue
		}
		next = time.Now().Add(HeartbeatInterval)
		r.publishStatus(ctx)
		r.mu.Lock()
		f := r.beat
		r.mu.Unlock()
		if f != nil {
			f()
		}
	}
}

// read takes one record of the deploys or hosts topic; live: hand a
// deployment to its pipeline's applier.
func (r *Registry) read(rec *kgo.Record, live bool) {
	var d Deployment
	applyIt := false
	r.mu.Lock()
	switch rec.Topic {
	case r.Deploys:
		if err := json.Unmarshal(rec.Value, &d); err != nil || d.Pipeline != string(rec.Key) || !isDigest(d.Digest) {
			r.log.Warn("admin.registry: a deployment record that does not parse is ignored", "topic", rec.Topic, "offset", rec.Offset, "err", err)
			break
		}
		// Labels reach metrics and terminals: one that is not a label
		// (written by another writer of the topic) is dropped.
		d.Label = verlabel.Clean(d.Label)
		if d.Canary != nil {
			d.Canary.Label = verlabel.Clean(d.Canary.Label)
		}
		r.deploys[d.Pipeline], r.deployAt[d.Pipeline] = d, rec.Offset
		applyIt = live && r.apply != nil
	case r.Hosts:
		r.readHostLocked(rec)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if applyIt {
		r.appliers.enqueue(r, d)
	}
}

// Deployment is the fleet's deployment of pipeline, if any.
func (r *Registry) Deployment(pipeline string) (Deployment, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.deploys[pipeline]
	return d, ok
}

// Running records what this host runs for pipeline, and the deployment
// it could not run (failed, with err) if any, and publishes it.
func (r *Registry) Running(ctx context.Context, pipeline, digest, failed string, err error) {
	r.mu.Lock()
	r.status.Pipelines[pipeline] = digest
	if err != nil {
		r.status.Failed[pipeline] = Failure{Digest: failed, Error: err.Error()}
	} else {
		delete(r.status.Failed, pipeline)
	}
	r.mu.Unlock()
	r.publishStatus(ctx)
}

func (r *Registry) publishStatus(ctx context.Context) {
	r.mu.Lock()
	counts := r.counts
	r.mu.Unlock()
	var vs map[string]map[string]Counts
	if counts != nil {
		vs = counts() // outside mu: it reads the runner
	}
	r.mu.Lock()
	r.status.At = time.Now().UTC()
	if vs != nil {
		r.status.Versions = vs
	}
	b, _ := json.Marshal(r.status)
	r.mu.Unlock()
	if err := r.cl.ProduceSync(ctx, &kgo.Record{Topic: r.Hosts, Key: []byte(r.host), Value: b}).FirstErr(); err != nil && ctx.Err() == nil {
		r.log.Warn("admin.registry: writing this host's status", "err", err)
	}
}

// Leave removes the host's status (a clean stop: it is no longer part of
// the fleet).
// It returns when ctx ends even if the record is still buffered (brokers
// unreachable: the client does not give up on a buffered record for its
// context), and the registry is then closed by the caller.
func (r *Registry) Leave(ctx context.Context) {
	acked := make(chan error, 1)
	r.cl.Produce(ctx, &kgo.Record{Topic: r.Hosts, Key: []byte(r.host)}, func(_ *kgo.Record, err error) { acked <- err })
	var err error
	select {
	case err = <-acked:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		r.log.Warn("admin.registry: removing this host's status", "err", err)
	}
}

// Publish writes wasm's chunks (unless wasm is nil: a rollback to a module
// written before) and then the deployment, both acknowledged. It returns
// the deployment record's offset: the deployment is superseded once one
// written after it is read (Superseded).
func (r *Registry) Publish(ctx context.Context, d Deployment, wasm []byte) (int64, error) {
	if wasm != nil {
		if err := r.PutModule(ctx, wasm); err != nil {
			return 0, err
		}
		d.Size = len(wasm)
	}
	d.At, d.By = time.Now().UTC(), r.host
	b, _ := json.Marshal(d)
	rec, err := r.cl.ProduceSync(ctx, &kgo.Record{Topic: r.Deploys, Key: []byte(d.Pipeline), Value: b}).First()
	if err != nil {
		return 0, fmt.Errorf("writing the deployment to %s: %w", r.Deploys, err)
	}
	r.pruneSoon() // modules this deployment leaves unnamed (prune.go)
	return rec.Offset, nil
}

// Superseded reports whether the deployment of pipeline read last was
// written after the one at offset (as Publish returned it), and returns
// it if so.
func (r *Registry) Superseded(pipeline string, offset int64) (Deployment, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.deployAt[pipeline]; ok && at > offset {
		return r.deploys[pipeline], true
	}
	return Deployment{}, false
}

// HostID is this host's id.
func (r *Registry) HostID() string { return r.host }

// Changed returns a channel closed at the next record read.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func isDigest(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}
