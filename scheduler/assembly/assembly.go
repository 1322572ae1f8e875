// Package assembly puts a wasmstream process together and takes it apart:
// the runner (scheduler.Runner: modules, pipelines, the embedded broker),
// then the metrics and health endpoints and the admin API (bringing back
// the module versions deployed before a restart), then consuming; and, at
// shutdown, the stages in reverse: stop fetching, drain and commit, leave
// the groups, close the endpoints. The CLI (cmd/wasmstream) only parses
// flags, handles signals and prints status.
package assembly

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/dashboard"
	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// Host is a started wasmstream process.
type Host struct {
	cfg *config.Config
	log *slog.Logger
	r   *scheduler.Runner

	dash *dashboard.Server // the live dashboard; nil without metrics

	metricsSrv, adminSrv *admin.Server
	meter                *sdkmetric.MeterProvider
	reg                  *registry.Registry // nil without admin.registry
	store                *admin.Store       // nil without the admin API
	overrides            []Override

	// token is the admin token ("" with the API off), read before
	// anything else is done (StartWith); throttle counts every attempt at
	// it, at the admin API and at the dashboard alike.
	token    string
	throttle *admin.Throttle
}

// Options are how a process starts.
type Options struct {
	// CompileConfigModules compiles a pipeline's config module even when a
	// deployed version replaces it (`run --compile-config-module`), so a
	// broken config module is found before it would matter.
	CompileConfigModules bool
}

// Start assembles the process from cfg and starts consuming. ctx bounds
// start-up (loading modules, reaching the brokers). On error nothing is
// left running.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Host, error) {
	return StartWith(ctx, cfg, log, Options{})
}

// StartWith is Start with opts. The version deployed before (the fleet's
// registry, else the module store) is found first, so that a pipeline it
// replaces compiles that version only, not the config's module too.
func StartWith(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) (*Host, error) {
	h := &Host{cfg: cfg, log: log, throttle: admin.NewThrottle()}
	// The admin token is part of the config: a missing, short or exposed
	// one is said before anything touches the cluster (a topic created, a
	// group joined), not once the pipelines run.
	if *cfg.Admin.Enabled {
		t, err := AdminToken(cfg)
		if err != nil {
			return nil, err
		}
		h.token = t
	}
	mods, err := h.deployedModules(ctx)
	if err != nil {
		h.closeRegistry()
		return nil, err
	}
	ropts := scheduler.Options{Modules: mods, CheckConfigModules: opts.CompileConfigModules}
	if h.reg != nil {
		ropts.RegistryPrefix = h.reg.Prefix()
	}
	r, err := scheduler.NewRunnerWith(ctx, cfg, log, ropts)
	if err != nil {
		h.closeRegistry()
		return nil, err
	}
	h.r = r
	if err := h.startOps(ctx); err != nil {
		h.closeOps()
		r.Stop(context.Background())
		return nil, err
	}
	r.Start()
	return h, nil
}

// Override is a pipeline whose config module does not run: the version
// deployed through the admin API (the module store) or the fleet's
// registry replaces it.
type Override struct {
	Pipeline     string
	Digest       string // what runs
	Label        string // its label, "" for none
	From         string // "the fleet registry (<topic>)" or "the module store (<dir>)"
	ConfigModule string // the config's module path, which does not run
	ConfigDigest string // its digest ("" if it cannot be read)
}

// Overrides lists the pipelines whose config module a deployed version
// replaced at start.
func (h *Host) Overrides() []Override { return slices.Clone(h.overrides) }

// deployedModules opens the module store and (unless the broker is the
// embedded one, which starts empty with the runner) the fleet's registry,
// and returns the module deployed for each pipeline whose config module it
// replaces, each logged loudly and listed in h.overrides.
func (h *Host) deployedModules(ctx context.Context) (map[string][]byte, error) {
	cfg := h.cfg
	if !*cfg.Admin.Enabled {
		return nil, nil
	}
	dir := cfg.AdminPath(cfg.Admin.StoreDir)
	store, err := admin.OpenStore(dir, h.log)
	if err != nil {
		return nil, err
	}
	h.store = store
	if *cfg.Admin.Registry && !cfg.IsEmbedded() {
		// Not reaching the registry here is not the end: the config's
		// modules are then loaded first, as without a deployment, so their
		// problems are reported before the brokers'; startOps opens the
		// registry again and applies what it says, or fails saying why.
		// Debug only: most often the brokers cannot be reached at all, and
		// the runner's error says so next; a warning here read as if the
		// host would go on.
		if err := h.openRegistry(ctx, cfg.Kafka.Brokers); err != nil {
			h.log.Debug("the fleet registry cannot be read before loading the modules: the config's modules load first", "err", err)
			h.reg = nil
		}
	}
	mods := map[string][]byte{}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		if pc.VersionFromConfig() {
			continue // the config's module runs (resumeFromConfig)
		}
		path := cfg.ModulePath(pc)
		cfgDigest := ""
		if b, err := os.ReadFile(path); err == nil {
			cfgDigest = admin.Digest(b)
		}
		var digest, from string
		var wasm []byte
		if h.reg != nil {
			if d, ok := h.reg.Deployment(pc.Name); ok {
				if wasm, err = h.store.Fetch(ctx, h.reg, pc.Name, d.Digest, d.Size); err != nil {
					return nil, fmt.Errorf("admin.registry: pipeline %s is deployed with %s (%s), which cannot be read here: %w", pc.Name, short(d.Digest), h.reg.Deploys, err)
				}
				if err := store.SetLabel(d.Digest, d.Label); err != nil {
					return nil, fmt.Errorf("admin.store_dir: %w", err)
				}
				digest, from = d.Digest, "the fleet registry ("+h.reg.Deploys+")"
			}
		}
		if wasm == nil {
			if d, ok := store.Active(pc.Name); ok && d != cfgDigest {
				if wasm, err = store.Get(d); err != nil {
					return nil, fmt.Errorf("admin.store_dir: pipeline %s was deployed with %s, which cannot be read: %w", pc.Name, short(d), err)
				}
				digest, from = d, "the module store ("+dir+")"
			}
		}
		if wasm == nil || digest == cfgDigest {
			continue
		}
		mods[pc.Name] = wasm
		o := Override{Pipeline: pc.Name, Digest: digest, Label: store.Label(digest), From: from, ConfigModule: path, ConfigDigest: cfgDigest}
		h.overrides = append(h.overrides, o)
		h.log.Warn("CONFIG OVERRIDDEN: the deployed version runs, not the config's module", "pipeline", o.Pipeline,
			"runs", short(o.Digest), "label", o.Label, "from", o.From, "config_module", o.ConfigModule, "config_digest", short(o.ConfigDigest))
	}
	return mods, nil
}

func (h *Host) openRegistry(ctx context.Context, brokers []string) error {
	base, err := kafkaconn.Opts(h.cfg.Kafka, brokers)
	if err != nil {
		return err
	}
	h.reg, err = registry.Open(ctx, registry.Config{Base: base, Prefix: h.cfg.RegistryPrefix(), OldPrefix: h.cfg.OldDefaultRegistryPrefix(),
		HostID: h.cfg.Host.ID, MaxModuleBytes: int(h.cfg.Admin.MaxModuleBytes)}, h.log)
	return err
}

// closeRegistry closes a registry opened but not started.
func (h *Host) closeRegistry() {
	if h.reg != nil {
		h.reg.Close()
		h.reg = nil
	}
}

// short is a digest's first 12 digits.
func short(d string) string { return d[:min(12, len(d))] }

// Runner is the process's runner.
func (h *Host) Runner() *scheduler.Runner { return h.r }

// ShutdownMargin is what Shutdown may take beyond shutdown.drain_timeout:
// the final commits, leaving the groups and the fleet, closing the
// endpoints. Past drain_timeout + ShutdownMargin, Shutdown returns false
// whatever the brokers do (RELIABILITY.md, "Stopping").
const ShutdownMargin = 15 * time.Second

// fleetLeaveTimeout bounds removing the host's status from the fleet
// registry at a stop, and closeTimeout closing the endpoints.
const (
	fleetLeaveTimeout = 5 * time.Second
	closeTimeout      = 5 * time.Second
)

// Shutdown stops the process in stages (stop fetching, drain in-flight
// records, commit, leave the groups, then close the endpoints) and reports
// whether it finished. It returns within shutdown.drain_timeout plus
// ShutdownMargin even when a stage hangs (brokers unreachable, a client
// that ignores its context): the stages run on a goroutine of their own,
// which is abandoned then — the process is about to exit, and what was not
// committed is processed again on restart.
func (h *Host) Shutdown() bool {
	h.log.Info("shutting down: draining in-flight records, committing, leaving the group", "drain_timeout", h.cfg.Shutdown.DrainTimeout)
	bound := h.cfg.Shutdown.DrainTimeout + ShutdownMargin
	// The runner's own bound leaves the margin's last part to the
	// endpoints' close.
	sctx, cancel := context.WithTimeout(context.Background(), bound-closeTimeout)
	defer cancel()
	finished := make(chan bool, 1)
	go func() {
		h.leaveFleet() // first: the runner's stop also stops an embedded broker
		h.r.Stop(sctx)
		ok := !errors.Is(sctx.Err(), context.DeadlineExceeded)
		h.closeOps()
		finished <- ok
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case ok := <-finished:
		return ok
	case <-t.C:
		h.log.Error("shutdown did not finish within shutdown.drain_timeout plus its margin: giving up on it", "drain_timeout", h.cfg.Shutdown.DrainTimeout, "margin", ShutdownMargin)
		return false
	}
}

// startOps starts the metrics and health endpoints and the admin API, and
// brings back the module versions the admin API deployed before a restart.
func (h *Host) startOps(ctx context.Context) error {
	cfg, r := h.cfg, h.r
	if *cfg.Admin.Enabled {
		// Bound before metrics.listen, which may be a port-0 address
		// (admin.Bind); served once the versions are back.
		var err error
		if h.adminSrv, err = admin.Bind("admin.listen", cfg.Admin.Listen); err != nil {
			return err
		}
	}
	if cfg.Metrics.Listen != "" {
		if err := h.startMetrics(); err != nil {
			return err
		}
	}
	if !*cfg.Admin.Enabled {
		return nil
	}
	store := h.store
	if *cfg.Admin.Registry && h.reg == nil { // the embedded broker (started with the runner), or not reached before
		if err := h.openRegistry(ctx, r.Brokers()); err != nil {
			return err
		}
	}
	api, err := admin.NewAPI(h.token, store, r, cfg.Admin.MaxModuleBytes, h.log)
	if err != nil {
		return err
	}
	api.UseThrottle(h.throttle)
	if h.meter != nil {
		if err := api.RegisterMetrics(h.meter.Meter("github.com/wasmstream/wasmstream")); err != nil {
			return err
		}
	}
	if h.reg != nil {
		// Before the API serves (a request never sees the host-only
		// strategy on a fleet host), and before the versions resume: the
		// fleet's deployments are applied through it.
		api.UseRegistry(h.reg)
		api.SetCanaryAbortMargin(*cfg.Admin.CanaryAbortMargin)
	}
	api.FromConfig(fromConfig(cfg)...)
	if err := h.resumeVersions(ctx, store, api); err != nil {
		return err
	}
	if h.dash != nil {
		h.dash.SetDeploys(store)
		if h.reg != nil {
			h.dash.SetFleet(h.reg)
		}
	}
	h.adminSrv.Serve(api.Handler(), h.log)
	h.log.Info("admin API", "addr", "http://"+h.adminSrv.Addr)
	if h.reg != nil {
		h.reg.OnDeploy(api.Apply)
		h.reg.OnHeartbeat(h.versionCounts, func() { api.CheckCanaries(context.Background()) })
		for _, pc := range cfg.Pipelines {
			if d, ok := store.Active(pc.Name); ok {
				h.reg.Running(ctx, pc.Name, d, "", nil)
			}
		}
		h.reg.Start()
		h.log.Info("fleet registry", "topics", h.reg.Modules+" "+h.reg.Deploys+" "+h.reg.Hosts)
	}
	api.PruneStore()
	return nil
}

// startMetrics starts the metrics and health endpoints (metrics.listen),
// with the dashboard and /status beside them.
func (h *Host) startMetrics() error {
	cfg, r := h.cfg, h.r
	o := cfg.Metrics.OTLP
	meter, handler, mp, err := admin.NewMeter(admin.OTLP{Endpoint: o.Endpoint, Insecure: o.Insecure, Interval: o.Interval})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	h.meter = mp
	if err := r.RegisterMetrics(meter); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /status", scheduler.StatusHandler(r))
	mux.Handle("/", admin.HealthHandler(handler, r.Ready))
	dh, err := h.dashboardHandler(mux)
	if err != nil {
		return err
	}
	if err := h.dash.RegisterMetrics(meter); err != nil {
		return err
	}
	h.metricsSrv, err = admin.Listen("metrics.listen", cfg.Metrics.Listen, dh, h.log)
	if err != nil {
		return err
	}
	h.log.Info("metrics and health endpoints", "addr", "http://"+h.metricsSrv.Addr, "paths", "/metrics /healthz /readyz /status /dashboard")
	return nil
}

// resumeVersions makes each pipeline run, and store record as active, the
// version its config says (version_source: config: resumeFromConfig) or
// the version it ran before: the one deployed before a restart or found in the
// fleet's registry before the modules loaded (already running:
// deployedModules), else the config's module, the first version in the
// store on a first start. On a fleet host, the registry's deployment is
// then applied as every later one is (API.ApplyAtStart: the stable version
// first, then the canary). Then it labels what runs.
func (h *Host) resumeVersions(ctx context.Context, store *admin.Store, api *admin.API) error {
	cfg, r := h.cfg, h.r
	overridden := map[string]string{}
	for _, o := range h.overrides {
		overridden[o.Pipeline] = o.Digest
		h.log.Info("running the deployed version", "pipeline", o.Pipeline, "digest", short(o.Digest), "label", o.Label, "from", o.From)
	}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		if pc.VersionFromConfig() {
			if err := h.resumeFromConfig(ctx, store, api, i); err != nil {
				return err
			}
			continue
		}
		if d, ok := overridden[pc.Name]; ok {
			// Running already (deployedModules, NewRunnerWith).
			if err := store.Activate(pc.Name, d); err != nil {
				return fmt.Errorf("admin.store_dir: %w", err)
			}
			if err := h.applyFleet(ctx, api, pc.Name, false); err != nil {
				return err
			}
			continue
		}
		if h.reg != nil {
			if _, ok := h.reg.Deployment(pc.Name); ok {
				if err := h.applyFleet(ctx, api, pc.Name, true); err != nil {
					return err
				}
				continue
			}
		}
		// The config's module is what runs: on a first start it is the first
		// version in the store.
		cfgWasm, err := os.ReadFile(cfg.ModulePath(pc))
		if err != nil {
			return err
		}
		d, err := store.Put(pc.Name, "config", cfgWasm)
		if err == nil {
			err = store.Activate(pc.Name, d)
		}
		if err != nil {
			return fmt.Errorf("admin.store_dir: %w", err)
		}
	}
	for _, pc := range cfg.Pipelines {
		if d, ok := store.Active(pc.Name); ok {
			r.SetLabel(pc.Name, d, store.Label(d))
		}
	}
	return nil
}

// versionCounts is what each version of each pipeline decided on this
// host, for the registry's heartbeat.
func (h *Host) versionCounts() map[string]map[string]registry.Counts {
	out := map[string]map[string]registry.Counts{}
	for _, name := range h.r.PipelineNames() {
		m := map[string]registry.Counts{}
		for _, v := range h.r.Versions(name) {
			m[v.Digest] = countsOf(v)
		}
		out[name] = m
	}
	return out
}

// countsOf is what the heartbeat says of a version: its counts, by kind,
// and for a canary its most failing partitions (at most
// registry.MaxPartitionsListed, as the registry holds statuses to).
func countsOf(v scheduler.VersionStats) registry.Counts {
	c := registry.Counts{Records: v.Records, Failed: v.Failed, Checks: v.Checks}
	for k, s := range v.Kinds {
		if c.Kinds == nil {
			c.Kinds = map[string]registry.KindCounts{}
		}
		c.Kinds[k] = registry.KindCounts{Failed: s.Failed, Checked: s.Checked, Shared: s.Shared}
	}
	if !v.Canary || len(v.Partitions) == 0 {
		return c
	}
	parts := slices.SortedFunc(maps.Keys(v.Partitions), func(a, b string) int {
		if c := cmp.Compare(v.Partitions[b], v.Partitions[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	c.Partitions = map[string]int64{}
	for _, p := range parts[:min(len(parts), registry.MaxPartitionsListed)] {
		c.Partitions[p] = v.Partitions[p]
	}
	return c
}

// applyFleet applies the fleet registry's deployment of pipeline name, if
// it has one (API.ApplyAtStart); loud: the host switched to it from the
// config's module, and says so.
func (h *Host) applyFleet(ctx context.Context, api *admin.API, name string, loud bool) error {
	if h.reg == nil {
		return nil
	}
	d, ok := h.reg.Deployment(name)
	if !ok {
		return nil
	}
	if err := api.ApplyAtStart(ctx, h.reg, d); err != nil {
		return fmt.Errorf("admin.registry: pipeline %s is deployed with %s (%s), which cannot run here: %w", name, short(d.Digest), h.reg.Deploys, err)
	}
	if loud {
		h.log.Info("running the deployed version", "pipeline", name, "digest", short(d.Digest), "from", h.reg.Deploys, "deployed_by", d.By, "at", d.At)
	}
	return nil
}

// leaveFleet removes the host's status from the fleet's registry (a clean
// stop: no longer one of its live hosts) and stops following it.
func (h *Host) leaveFleet() {
	if h.reg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetLeaveTimeout)
	defer cancel()
	h.reg.Leave(ctx)
	h.reg.Close()
	h.reg = nil
}

func (h *Host) closeOps() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	h.leaveFleet()
	h.adminSrv.Close(ctx)
	h.dash.Close() // ends its event streams, which Shutdown would wait for
	h.metricsSrv.Close(ctx)
	if h.meter != nil {
		h.meter.Shutdown(ctx)
	}
}

// AdminToken reads the admin API's token: WASMSTREAM_ADMIN_TOKEN, or
// admin.token_file. There is no default: an admin API without a token is
// refused, and so are a short token and a token file other users may read
// (admin.ResolveToken).
func AdminToken(cfg *config.Config) (string, error) {
	return admin.ResolveToken(os.Getenv(admin.TokenEnv), cfg.AdminPath(cfg.Admin.TokenFile))
}
