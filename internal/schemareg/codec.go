package schemareg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
)

// Decoded says what a framed value was decoded with.
type Decoded struct {
	SchemaID int
	Type     sr.SchemaType
	// Index is the Protobuf message index; nil for other types.
	Index []int
}

// AppendJSON reads the frame of b (a record's key or value, part), fetches
// its schema (cached by id), decodes the payload and appends its JSON to
// dst, at most maxJSON bytes of it. header, when not nil, says whether the
// record has a header of a name (a schema id in the headers is refused by
// name). Every error is an *Error: Retryable when the registry is down,
// terminal otherwise, with the schema id when the frame gave one.
func (c *Client) AppendJSON(ctx context.Context, dst, b []byte, part wire.Part, header func(string) bool, maxJSON int) ([]byte, Decoded, error) {
	id, rest, err := wire.ParseHeader(b, part, header)
	if err != nil {
		return dst, Decoded{}, newErr(BadFrame, 0, err, "%v", err)
	}
	d := Decoded{SchemaID: id}
	s, err := c.SchemaByID(ctx, id)
	if err != nil {
		return dst, d, err
	}
	d.Type = s.Type
	out, err := dst, error(nil)
	switch {
	case s.avro != nil:
		out, err = s.avro.AppendJSON(dst, rest, maxJSON)
	case s.proto != nil:
		var payload []byte
		if d.Index, payload, err = wire.ParseIndex(rest, part, id); err != nil {
			return dst, d, newErr(BadFrame, id, err, "%v", err)
		}
		out, err = s.proto.AppendJSON(dst, payload, d.Index, maxJSON)
	default:
		out, err = s.json.AppendJSON(dst, rest, maxJSON)
	}
	if err != nil {
		return dst, d, newErr(Decode, id, err, "%s: schema id %d: %v", part, id, err)
	}
	return out, d, nil
}

// EncoderConfig names the schema an Encoder writes with.
type EncoderConfig struct {
	Subject string
	// Version is the subject's version; 0 or -1 is latest, re-resolved
	// every RefreshPeriod.
	Version int
	// Message is the Protobuf message written (full name, or relative to
	// the file's package); "" is the file's first message.
	Message string
	// Schema, when its text is set, is the schema written (a schema file
	// in the config): the encoder writes with the id the subject holds it
	// under, looked up at start and never refreshed; Version is unused.
	Schema sr.Schema
	// Register registers Schema under Subject first (the registry's
	// compatibility rules decide whether it may). Without it the encoder
	// never registers anything: a Schema the subject does not hold fails
	// NewEncoder (Kind NotFound).
	Register bool
}

// Encoder turns JSON into framed values with one subject's schema. Safe for
// concurrent use; Close ends its refresh.
type Encoder struct {
	c      *Client
	cfg    EncoderConfig
	latest bool
	cur    atomic.Pointer[target]
	// refreshing is set while a refresh runs; wg waits for it.
	refreshing atomic.Bool
	mu         sync.Mutex // guards closed and wg.Add against Close
	closed     bool
	wg         sync.WaitGroup
	lastErr    atomic.Pointer[error]
}

type target struct {
	s       *Schema
	version int
	index   []int
	at      time.Time
}

// NewEncoder resolves cfg's subject and version now: a registry that is
// down, an unknown subject or a schema that does not compile fails here,
// at start.
func (c *Client) NewEncoder(ctx context.Context, cfg EncoderConfig) (*Encoder, error) {
	if cfg.Subject == "" {
		return nil, errors.New("schema registry encoder: no subject")
	}
	if cfg.Version == 0 {
		cfg.Version = -1
	}
	e := &Encoder{c: c, cfg: cfg, latest: cfg.Version == -1 && cfg.Schema.Schema == ""}
	resolve := e.resolve
	if cfg.Schema.Schema != "" {
		resolve = e.resolveGiven
	}
	t, err := resolve(ctx)
	if err != nil {
		return nil, err
	}
	e.cur.Store(t)
	return e, nil
}

// resolveGiven finds the id of the encoder's given schema under its
// subject, registering it there first when told to. The schema is
// compiled before the registry is asked: one that does not compile is
// neither registered nor looked up.
func (e *Encoder) resolveGiven(ctx context.Context) (*target, error) {
	c, subject := e.c, e.cfg.Subject
	if _, err := c.compile(ctx, 0, e.cfg.Schema); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	if e.cfg.Register {
		if _, err := c.sr.RegisterSchema(ctx, subject, e.cfg.Schema, -1, -1); err != nil {
			se := c.classify(err, 0, subject, -1, "registering the schema under subject "+subject)
			if se.Status == http.StatusConflict { // the registry's reason is in the message
				se.Msg += " (the subject's compatibility rules refuse this schema: make it compatible with the subject's versions, or change the subject's compatibility level)"
			}
			return nil, se
		}
	}
	ss, err := c.sr.LookupSchema(ctx, subject, e.cfg.Schema)
	if err != nil {
		se := c.classify(err, 0, subject, -1, "looking the schema up under subject "+subject)
		if se.Kind == NotFound {
			se.Msg = fmt.Sprintf("schema registry %s: subject %s does not hold the schema given (HTTP %d)", c.url, subject, se.Status)
		}
		return nil, se
	}
	s, err := c.cached(ss.ID, func() (*Schema, error) { return c.compile(ctx, ss.ID, ss.Schema) })
	if err != nil {
		return nil, err
	}
	t := &target{s: s, version: ss.Version, at: time.Now()}
	if s.proto != nil {
		if t.index, err = s.proto.Index(e.cfg.Message); err != nil {
			return nil, &Error{Kind: BadSchema, SchemaID: s.ID, Subject: subject, Version: ss.Version, Msg: fmt.Sprintf("subject %s version %d (schema id %d): %v", subject, ss.Version, s.ID, err)}
		}
	}
	return t, nil
}

func (e *Encoder) resolve(ctx context.Context) (*target, error) {
	c := e.c
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	what := fmt.Sprintf("subject %s version %s", e.cfg.Subject, versionName(e.cfg.Version))
	ss, err := c.sr.SchemaByVersion(ctx, e.cfg.Subject, e.cfg.Version)
	if err != nil {
		return nil, c.classify(err, 0, e.cfg.Subject, e.cfg.Version, what)
	}
	s, err := c.cached(ss.ID, func() (*Schema, error) { return c.compile(ctx, ss.ID, ss.Schema) })
	if err != nil {
		if se, ok := err.(*Error); ok && se.Subject == "" {
			se.Subject, se.Version = e.cfg.Subject, e.cfg.Version
			se.Msg = what + ": " + se.Msg
		}
		return nil, err
	}
	t := &target{s: s, version: ss.Version, at: time.Now()}
	if s.proto != nil {
		if t.index, err = s.proto.Index(e.cfg.Message); err != nil {
			return nil, &Error{Kind: BadSchema, SchemaID: s.ID, Subject: e.cfg.Subject, Version: e.cfg.Version, Msg: fmt.Sprintf("%s (schema id %d): %v", what, s.ID, err)}
		}
	}
	return t, nil
}

func versionName(v int) string {
	if v == -1 {
		return "latest"
	}
	return fmt.Sprint(v)
}

// Schema is the schema the encoder writes with now, and its version.
func (e *Encoder) Schema() (*Schema, int) {
	t := e.cur.Load()
	return t.s, t.version
}

// LastRefreshError is the error of the latest refresh that failed since
// the last one that succeeded, or nil.
func (e *Encoder) LastRefreshError() error {
	if p := e.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// AppendFramed encodes js with the subject's schema and appends the framed
// value (0x00, the schema id, the Protobuf message index, the payload) to
// dst. A JSON value that does not fit is an *Error of Kind Encode naming
// the field. With version latest, a refresh runs in the background once
// RefreshPeriod has passed; until it succeeds the schema in hand is used.
func (e *Encoder) AppendFramed(dst, js []byte) ([]byte, error) {
	t := e.cur.Load()
	if e.latest && time.Since(t.at) >= e.c.cfg.RefreshPeriod {
		e.refresh()
	}
	start := len(dst)
	out := wire.AppendHeader(dst, t.s.ID)
	var err error
	switch {
	case t.s.avro != nil:
		out, err = t.s.avro.AppendBinary(out, js)
	case t.s.proto != nil:
		out = wire.AppendIndex(out, t.index)
		out, err = t.s.proto.AppendBinary(out, js, t.index)
	default:
		out, err = t.s.json.AppendBinary(out, js)
	}
	if err != nil {
		return dst[:start], &Error{Kind: Encode, SchemaID: t.s.ID, Subject: e.cfg.Subject, Version: t.version, Err: err,
			Msg: fmt.Sprintf("the output does not fit subject %s version %d (schema id %d): %v", e.cfg.Subject, t.version, t.s.ID, err)}
	}
	return out, nil
}

// refresh starts one background resolution of the latest version, unless
// one runs or the encoder is closed. It ends within RequestTimeout per
// request; Close waits for it.
func (e *Encoder) refresh() {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return // refreshing stays set: no refresh after Close
	}
	e.wg.Add(1)
	go func() { // owned by the Encoder: Close waits for it
		defer e.wg.Done()
		defer e.refreshing.Store(false)
		e.c.Stats.Refreshes.Add(1)
		t, err := e.resolve(context.Background())
		old := e.cur.Load()
		if err != nil {
			e.c.Stats.RefreshErrors.Add(1)
			if e.lastErr.Swap(&err) == nil {
				e.log(slog.LevelWarn, "schema registry: refreshing the output subject's latest version failed; the schema in hand is kept and the refresh tried again every refresh_period",
					"subject", e.cfg.Subject, "version", old.version, "schema_id", old.s.ID, "error", err.Error())
			}
			// Keep the schema in hand; try again after another period.
			e.cur.Store(&target{s: old.s, version: old.version, index: old.index, at: time.Now()})
			return
		}
		if e.lastErr.Swap(nil) != nil {
			e.log(slog.LevelInfo, "schema registry: the output subject's latest version is refreshed again", "subject", e.cfg.Subject)
		}
		if t.s.ID != old.s.ID || t.version != old.version {
			e.log(slog.LevelInfo, "schema registry: outputs are written with the output subject's new latest version",
				"subject", e.cfg.Subject, "version", t.version, "schema_id", t.s.ID, "previous_version", old.version, "previous_schema_id", old.s.ID)
		}
		e.cur.Store(t)
	}()
}

// log logs msg when the client has a logger.
func (e *Encoder) log(level slog.Level, msg string, args ...any) {
	if l := e.c.cfg.Log; l != nil {
		l.Log(context.Background(), level, msg, args...)
	}
}

// Close stops refreshes and waits for one that runs.
func (e *Encoder) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.wg.Wait()
}
