package assembly

import (
	"net/http"

	"github.com/wasmstream/wasmstream/scheduler/dashboard"
)

// dashboardHandler creates the live dashboard (scheduler/dashboard)
// and serves it beside next on the metrics listener. On a loopback
// metrics.listen it is open; elsewhere it needs the admin token, and with
// the admin API off it refuses every request.
func (h *Host) dashboardHandler(next http.Handler) (http.Handler, error) {
	cfg := h.cfg
	dc := dashboard.Config{Source: h.r, Open: dashboard.OpenOn(cfg.Metrics.Listen), Hosts: cfg.Metrics.DashboardHosts, Throttle: h.throttle, Log: h.log}
	if !dc.Open {
		dc.Token = h.token // "" with the admin API off
	}
	if cfg.Tracing.Exporter == "jsonl" {
		dc.TraceFile = cfg.TracingFile()
	}
	h.dash = dashboard.New(dc)
	if err := h.r.ObserveFailures(h.dash); err != nil {
		return nil, err
	}
	if !dc.Open && dc.Token == "" {
		h.log.Warn("the dashboard refuses every request: metrics.listen is not a loopback address and the admin API (whose token it asks for) is off")
	}
	return h.dash.Handler(next), nil
}

// AdminURL is the admin API's address ("" with the API off).
func (h *Host) AdminURL() string {
	if h.adminSrv == nil {
		return ""
	}
	return "http://" + h.adminSrv.Addr
}

// DashboardURL is the live dashboard's address ("" without metrics).
func (h *Host) DashboardURL() string {
	if h.metricsSrv == nil {
		return ""
	}
	return "http://" + h.metricsSrv.Addr + "/dashboard"
}
