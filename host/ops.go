package host

import (
	"context"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
)

// An Operation performs one kind of asynchronous operation for guests
// (asyncop.Operation, where the operations with settings are).
type Operation = asyncop.Operation

// A RecordOperation is an Operation that acts for its record, on its
// state: async_start calls StartRecord instead of Start, on the instance's
// goroutine during the guest's call, with the record's State (nil when the
// pipeline has none). What it needs of the record it must take before it
// returns (State.Reader); done is called as for Start. An error that is an
// abi.Errno is what async_start returns (the request was well formed but
// cannot start: a key of another partition); any other error is a
// malformed request.
type RecordOperation interface {
	Operation
	StartRecord(ctx context.Context, st State, req []byte, done func(result []byte)) (desc string, err error)
}

// AsyncConfig enables a module's asynchronous operations.
type AsyncConfig struct {
	// Config is the pipeline's async section, whole; its zero fields take
	// their defaults. The operations of its sections are the module's,
	// beside the timer and the state reads.
	asyncop.Config
	// Key names the section in refusals ("pipelines.lookup.async"); empty:
	// "async".
	Key string
	// Env is what the operations share with every module: the process's
	// clients.
	Env asyncop.Env
	// Operations adds or replaces operation kinds (tests, embedders).
	Operations map[abi.OpKind]Operation
}

// SetAsyncEnv sets what the asynchronous operations of the modules loaded
// afterwards share: the process's clients (its schema registry's). A
// module whose AsyncConfig gives an Env of its own keeps it.
func (e *Engine) SetAsyncEnv(env asyncop.Env) { e.asyncEnv.Store(&env) }

// operations are the operations of a module of cfg: the engine's Env
// unless cfg gives one.
func (e *Engine) operations(cfg AsyncConfig) map[abi.OpKind]Operation {
	if env := e.asyncEnv.Load(); env != nil && cfg.Env == (asyncop.Env{}) {
		cfg.Env = *env
	}
	return defaultOperations(cfg)
}

func defaultOperations(cfg AsyncConfig) map[abi.OpKind]Operation {
	key := cfg.Key
	if key == "" {
		key = "async"
	}
	ops := cfg.Config.Operations(key, cfg.Env)
	ops[abi.OpTimer] = timerOp{}
	ops[abi.OpStateGet] = stateGetOp{}
	ops[abi.OpStateScan] = stateScanOp{}
	for k, op := range cfg.Operations {
		ops[k] = op
	}
	return ops
}

// timerOp completes after the requested delay.
type timerOp struct{}

func (timerOp) Start(ctx context.Context, req []byte, done func([]byte)) (string, error) {
	d, err := abi.DecodeTimer(req)
	if err != nil {
		return "", err
	}
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			done(abi.AppendCompletionOK(nil, nil))
		case <-ctx.Done():
			done(abi.AppendCompletionError(nil, abi.CompletionError, "timer: "+ctx.Err().Error()))
		}
	}()
	return "timer " + d.String(), nil
}

// describe names an op for reports.
func describe(kind abi.OpKind, desc string, started time.Time) string {
	return desc + " (" + kind.String() + ", started " + strconv.FormatInt(time.Since(started).Milliseconds(), 10) + "ms ago)"
}
