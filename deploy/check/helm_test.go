package check

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/secretfile"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

const chartDir = "../helm/wasmstream"

// monitoringAPI is the Prometheus operator's API, which the chart looks
// for before rendering a PodMonitor.
const monitoringAPI = "monitoring.coreos.com/v1/PodMonitor"

// renderChart renders the chart as helm template does, release
// "wasmstream", with the values of valuesFile ("" for the chart's own)
// and set on top (the chart's values nested as in a values file), on a
// cluster that serves apis besides the built-in ones. It returns what
// rendering gives: the objects, or the error.
func renderChart(t *testing.T, valuesFile string, set map[string]any, apis ...string) (map[string]any, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if valuesFile != "" {
		if vals, err = chartutil.ReadValuesFile(valuesFile); err != nil {
			t.Fatal(err)
		}
	}
	vals = chartutil.CoalesceTables(set, vals)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
	caps.APIVersions = append(append(chartutil.VersionSet{}, caps.APIVersions...), apis...)
	if !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, caps.KubeVersion.Version) {
		t.Fatalf("the chart's kubeVersion %s refuses %s", chrt.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "wasmstream", Namespace: "streams", IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for name, text := range files {
		if strings.HasSuffix(name, ".txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		decodeAll(t, name, text, out)
	}
	return out, nil
}

// fleet returns the chart's four objects of every install, failing t if
// one is missing.
func fleet(t *testing.T, objs map[string]any) (*appsv1.StatefulSet, *corev1.ConfigMap, *policyv1.PodDisruptionBudget, *corev1.Service) {
	t.Helper()
	ss, _ := objs["StatefulSet/wasmstream"].(*appsv1.StatefulSet)
	cm, _ := objs["ConfigMap/wasmstream-config"].(*corev1.ConfigMap)
	pdb, _ := objs["PodDisruptionBudget/wasmstream"].(*policyv1.PodDisruptionBudget)
	svc, _ := objs["Service/wasmstream"].(*corev1.Service)
	if ss == nil || cm == nil || pdb == nil || svc == nil {
		t.Fatalf("want a StatefulSet, ConfigMap, PodDisruptionBudget and Service: %v", keys(objs))
	}
	return ss, cm, pdb, svc
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestHelmChartDefault: the chart with its own values renders objects
// that decode strictly into the Kubernetes API types and say what the raw
// manifests say (checkFleet); no Secret of the chart's (it references
// one), no PodMonitor on a cluster without the Prometheus operator, no
// NetworkPolicy unless asked for, pods spread over zones and nodes, and
// helm lint finds nothing.
func TestHelmChartDefault(t *testing.T) {
	objs, err := renderChart(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, cm, pdb, svc := fleet(t, objs)
	env := checkFleet(t, ss, cm, pdb, svc)
	if ref := env["WASMSTREAM_ADMIN_TOKEN"].ValueFrom.SecretKeyRef; ref.Name != "wasmstream-secrets" || ref.Key != "admin-token" {
		t.Errorf("the admin token from %s/%s: want the existing Secret wasmstream-secrets, key admin-token", ref.Name, ref.Key)
	}
	for id := range objs {
		if strings.HasPrefix(id, "Secret/") || strings.HasPrefix(id, "PodMonitor/") || strings.HasPrefix(id, "NetworkPolicy/") {
			t.Errorf("%s rendered with the default values on a cluster without the Prometheus operator", id)
		}
	}
	pod := ss.Spec.Template.Spec
	spread := map[string]bool{}
	for _, c := range pod.TopologySpreadConstraints {
		for k, v := range c.LabelSelector.MatchLabels {
			if ss.Spec.Template.Labels[k] != v {
				t.Errorf("the topology spread on %s selects %s=%s, not the pods", c.TopologyKey, k, v)
			}
		}
		spread[c.TopologyKey] = true
	}
	if !spread["topology.kubernetes.io/zone"] || !spread["kubernetes.io/hostname"] {
		t.Errorf("topology spread over %v: want zones and nodes", spread)
	}
	if ss.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a config change would not restart the pods")
	}
	if v := helmLint(t, nil); len(v) > 0 {
		t.Errorf("helm lint: %v", v)
	}
}

// helmLint runs helm lint's rules over the chart with vals and returns
// what it found at warning level or worse.
func helmLint(t *testing.T, vals map[string]any) []string {
	t.Helper()
	var out []string
	for _, m := range lint.AllWithKubeVersion(chartDir, vals, "streams", &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}).Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out
}

// TestHelmChartSecured: the chart with ci/secured-values.yaml (TLS against
// a company CA from an existing ConfigMap, mTLS with an existing
// kubernetes.io/tls Secret, SASL OAUTHBEARER with a token from an existing
// Secret, a NetworkPolicy, a PodMonitor on a cluster with the Prometheus
// operator) renders objects that decode strictly; the config loads; every
// file it names is on a volume the pod mounts, the secret ones with a mode
// the host accepts under the pod's fsGroup; laid out as the kubelet lays
// them out, the host builds its client's TLS and reads the token.
func TestHelmChartSecured(t *testing.T) {
	valuesFile := filepath.Join(chartDir, "ci/secured-values.yaml")
	objs, err := renderChart(t, valuesFile, nil, monitoringAPI)
	if err != nil {
		t.Fatal(err)
	}
	ss, cm, pdb, svc := fleet(t, objs)
	checkFleet(t, ss, cm, pdb, svc)
	labels := ss.Spec.Template.Labels
	pod := ss.Spec.Template.Spec

	pm, _ := objs["PodMonitor/wasmstream"].(*monitoringv1.PodMonitor)
	if pm == nil {
		t.Fatalf("no PodMonitor on a cluster with the Prometheus operator: %v", keys(objs))
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the PodMonitor's selector %s=%s does not select the pods", k, v)
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil || *pm.Spec.PodMetricsEndpoints[0].Port != "metrics" || pm.Spec.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Errorf("the PodMonitor's endpoints %+v: want /metrics on the port named metrics", pm.Spec.PodMetricsEndpoints)
	}

	np, _ := objs["NetworkPolicy/wasmstream"].(*networkingv1.NetworkPolicy)
	if np == nil {
		t.Fatalf("no NetworkPolicy with networkPolicy.enabled: %v", keys(objs))
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the NetworkPolicy's selector %s=%s does not select the pods", k, v)
		}
	}
	metricsPort := intstr.FromString("metrics")
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || *np.Spec.Ingress[0].Ports[0].Port != metricsPort || len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("the NetworkPolicy's ingress %+v: want the metrics port only, from the peers of networkPolicy.metricsFrom", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) < 2 || len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("the NetworkPolicy's egress %+v (%v): want DNS and the rules of networkPolicy.egress", np.Spec.Egress, np.Spec.PolicyTypes)
	}

	// The config, in a directory of the test's: it loads, and names its
	// files on the pod's volumes.
	root := t.TempDir()
	text := strings.ReplaceAll(cm.Data["config.yaml"], "/opt/wasmstream/modules/", root+"/")
	for _, m := range regexp.MustCompile(`module: (\S+)`).FindAllStringSubmatch(text, -1) {
		os.WriteFile(m[1], []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	}
	env := []string{"WASMSTREAM_HOST_ID=wasmstream-0"}
	for _, e := range pod.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Name != "WASMSTREAM_ADMIN_TOKEN" {
			env = append(env, e.Name+"=example-value")
		}
	}
	path := filepath.Join(root, "config.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	cfg, err := config.Load(path, env, nil)
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	tls, sasl := cfg.Kafka.TLS, cfg.Kafka.SASL
	if !tls.Enabled || tls.CAFile == "" || tls.CertFile == "" || tls.KeyFile == "" || tls.InsecureSkipVerify {
		t.Fatalf("want TLS verified against the company CA with a client certificate: %+v", tls)
	}
	if sasl.Mechanism != "OAUTHBEARER" || sasl.TokenFile == "" {
		t.Fatalf("want SASL OAUTHBEARER with a token file: %v", sasl)
	}
	if p := &cfg.Pipelines[0]; !p.VersionFromConfig() || p.ModuleLabel == "" {
		t.Errorf("pipeline %s: want version_source: config with a module_label (the GitOps example)", p.Name)
	}

	if os.Geteuid() != 0 {
		t.Skip("laying out the volumes as the kubelet does needs chown (root)")
	}
	ca, cert, key := pki(t)
	content := map[string][]byte{"ca.crt": ca, "tls.crt": cert, "tls.key": key, "token": []byte("eyJhbGciOiJub25lIn0.e30.")}
	for _, f := range []string{tls.CAFile, tls.CertFile, tls.KeyFile, sasl.TokenFile} {
		// The ConfigMap and Secrets exist beside the release: a volume
		// that lists its items names the key the values gave; one that
		// does not is a kubernetes.io/tls Secret (tls.crt, tls.key).
		mountFile(t, root, pod, f, content, func(v corev1.Volume, item string) error { return nil })
	}
	os.WriteFile(path, []byte(strings.ReplaceAll(text, "/etc/wasmstream-kafka/", root+"/etc/wasmstream-kafka/")), 0o644)
	if cfg, err = config.Load(path, env, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kafkaconn.Opts(cfg.Kafka, cfg.Kafka.Brokers); err != nil {
		t.Fatalf("the host cannot use the mounted files: %v", err)
	}
	if _, err := secretfile.Read(cfg.Kafka.SASL.TokenFile, "kafka.sasl.token_file", "the OAuth token", 1<<16); err != nil {
		t.Fatalf("the host refuses the mounted token: %v", err)
	}
	vals, _ := chartutil.ReadValuesFile(valuesFile)
	if v := helmLint(t, vals); len(v) > 0 {
		t.Errorf("helm lint: %v", v)
	}
}

// TestHelmChartRefusesBadValues: values the chart cannot honour fail the
// render with a message naming the value, rather than rendering a pod the
// host or the kubelet refuses later.
func TestHelmChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name string
		set  map[string]any
		want string
	}{
		{"memory limit in decimal units", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "2G"}}}, "resources.limits.memory"},
		{"GOMEMLIMIT at the limit", map[string]any{"goMemLimitPercent": 100}, "goMemLimitPercent"},
		{"OAUTHBEARER without a token", map[string]any{"kafka": map[string]any{"tls": map[string]any{"enabled": true}, "sasl": map[string]any{"mechanism": "OAUTHBEARER"}}}, "kafka.sasl.oauthTokenSecret.name"},
		{"a CA without TLS", map[string]any{"kafka": map[string]any{"tls": map[string]any{"ca": map[string]any{"configMap": "company-ca"}}}}, "kafka.tls.enabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderChart(t, "", c.set)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rendered: %v; want an error naming %s", err, c.want)
			}
		})
	}
}
