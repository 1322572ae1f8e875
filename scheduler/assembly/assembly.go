// Package assembly puts a wasmstream process together and takes it apart:
// the runner (scheduler.Runner: modules, pipelines, the embedded broker),
// then the metrics and health endpoints and the admin API (bringing back
// the module versions deployed before a restart), then consuming; and, at
// shutdown, the stages in reverse: stop fetching, drain and commit, leave
// the groups, close the endpoints. The CLI (cmd/wasmstream) only parses
// flags, handles signals and prints status.
package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/admin/dashboard"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// Host is a started wasmstream process.
type Host struct {
	cfg *config.Config
	log *slog.Logger
	r   *scheduler.Runner

	dash *dashboard.Server // the live dashboard; nil without metrics

	metricsSrv, adminSrv *admin.Server
	meter                *sdkmetric.MeterProvider
}

// Start assembles the process from cfg and starts consuming. ctx bounds
// start-up (loading modules, reaching the brokers). On error nothing is
// left running.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Host, error) {
	r, err := scheduler.NewRunner(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, log: log, r: r}
	if err := h.startOps(ctx); err != nil {
		h.closeOps()
		r.Stop(context.Background())
		return nil, err
	}
	r.Start()
	return h, nil
}

// Runner is the process's runner.
func (h *Host) Runner() *scheduler.Runner { return h.r }

// Shutdown stops the process in stages (stop fetching, drain in-flight
// records, commit, leave the groups, then close the endpoints) within
// shutdown.drain_timeout plus a margin, and reports whether it finished.
func (h *Host) Shutdown() bool {
	h.log.Info("shutting down: draining in-flight records, committing, leaving the group", "drain_timeout", h.cfg.Shutdown.DrainTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), h.cfg.Shutdown.DrainTimeout+30*time.Second)
	defer cancel()
	h.r.Stop(sctx)
	h.closeOps()
	return !errors.Is(sctx.Err(), context.DeadlineExceeded)
}

// startOps starts the metrics and health endpoints and the admin API, and
// brings back the module versions the admin API deployed before a restart.
func (h *Host) startOps(ctx context.Context) error {
	cfg, r := h.cfg, h.r
	if cfg.Metrics.Listen != "" {
		o := cfg.Metrics.OTLP
		meter, handler, mp, err := admin.NewMeter(admin.OTLP{Endpoint: o.Endpoint, Insecure: o.Insecure, Interval: o.Interval})
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		h.meter = mp
		if err := r.RegisterMetrics(meter); err != nil {
			return err
		}
		dh, err := h.dashboardHandler(admin.HealthHandler(handler, r.Ready))
		if err != nil {
			return err
		}
		h.metricsSrv, err = admin.Listen("metrics.listen", cfg.Metrics.Listen, dh, h.log)
		if err != nil {
			return err
		}
		h.log.Info("metrics and health endpoints", "addr", "http://"+h.metricsSrv.Addr, "paths", "/metrics /healthz /readyz /dashboard")
	}
	if !*cfg.Admin.Enabled {
		return nil
	}
	token, err := AdminToken(cfg)
	if err != nil {
		return err
	}
	store, err := admin.OpenStore(cfg.AdminPath(cfg.Admin.StoreDir), h.log)
	if err != nil {
		return err
	}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		cfgWasm, cerr := os.ReadFile(cfg.ModulePath(pc))
		if d, ok := store.Active(pc.Name); ok && (cerr != nil || admin.Digest(cfgWasm) != d) {
			wasm, err := store.Get(d)
			if err == nil {
				_, err = r.Deploy(ctx, pc.Name, wasm)
			}
			if err != nil {
				return fmt.Errorf("admin.store_dir: pipeline %s was deployed with %s, which cannot be loaded: %w", pc.Name, d[:12], err)
			}
			h.log.Info("running the deployed version", "pipeline", pc.Name, "digest", d[:12])
			continue
		}
		// The config's module is what runs: on a first start it is the first
		// version in the store.
		if cerr != nil {
			return cerr
		}
		d, err := store.Put(pc.Name, "config", cfgWasm)
		if err == nil {
			err = store.Activate(pc.Name, d)
		}
		if err != nil {
			return fmt.Errorf("admin.store_dir: %w", err)
		}
	}
	if h.dash != nil {
		h.dash.SetDeploys(store)
	}
	api, err := admin.NewAPI(token, store, r, cfg.Admin.MaxModuleBytes, h.log)
	if err != nil {
		return err
	}
	if h.meter != nil {
		if err := api.RegisterMetrics(h.meter.Meter("github.com/wasmstream/wasmstream")); err != nil {
			return err
		}
	}
	h.adminSrv, err = admin.Listen("admin.listen", cfg.Admin.Listen, api.Handler(), h.log)
	if err != nil {
		return err
	}
	h.log.Info("admin API", "addr", "http://"+h.adminSrv.Addr)
	return nil
}

func (h *Host) closeOps() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
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
