// Package check tests the deployment recipes in deploy/: the Kubernetes
// manifests, and the Helm chart as Helm's own library renders it
// (helm_test.go, for the default values and a secured cluster's), decode
// strictly into the Kubernetes API types and say what the README
// promises, the ConfigMap's config is a valid wasmstream config, the Dockerfile builds with deploy/build-static.sh and runs as
// non-root, and the systemd unit passes systemd-analyze verify. It is a
// module of its own so that the main module does not depend on k8s.io or
// helm.sh.
// image_build.sh runs the Dockerfile's build step on this machine.
package check

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/secretfile"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// objects decodes every manifest of ../kubernetes strictly (an unknown or
// misspelt field is an error) into the type its kind names, by kind and
// name ("ConfigMap/wasmstream-config").
func objects(t *testing.T) map[string]any {
	t.Helper()
	files, _ := filepath.Glob("../kubernetes/*.yaml")
	examples, _ := filepath.Glob("../kubernetes/example/*.yaml")
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decodeAll(t, f, string(b), out)
	}
	return out
}

// decodeAll decodes each document of text (documents separated by "---"
// lines) strictly into the type its kind names, adding it to out by kind
// and name; an unknown kind, an unknown field or a name twice fails t.
// source names text in the messages.
func decodeAll(t *testing.T, source, text string, out map[string]any) {
	t.Helper()
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		var obj any
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1/Secret":
			obj = &corev1.Secret{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "policy/v1/PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "monitoring.coreos.com/v1/PodMonitor":
			obj = &monitoringv1.PodMonitor{}
		default:
			t.Fatalf("%s: unexpected kind %s %s", source, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %s: %v", source, tm.Kind, err)
		}
		var om struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		yaml.Unmarshal([]byte(doc), &om)
		id := tm.Kind + "/" + om.Metadata.Name
		if out[id] != nil {
			t.Fatalf("%s: %s twice", source, id)
		}
		out[id] = obj
	}
}

func TestKubernetesManifests(t *testing.T) {
	objs := objects(t)
	ss, _ := objs["StatefulSet/wasmstream"].(*appsv1.StatefulSet)
	cm, _ := objs["ConfigMap/wasmstream-config"].(*corev1.ConfigMap)
	pdb, _ := objs["PodDisruptionBudget/wasmstream"].(*policyv1.PodDisruptionBudget)
	svc, _ := objs["Service/wasmstream"].(*corev1.Service)
	secret, _ := objs["Secret/wasmstream-secrets"].(*corev1.Secret)
	if ss == nil || cm == nil || pdb == nil || svc == nil || secret == nil {
		t.Fatalf("want a StatefulSet, ConfigMap, PodDisruptionBudget, Service and an example Secret: %v", objs)
	}
	env := checkFleet(t, ss, cm, pdb, svc)
	if _, ok := env["WASMSTREAM_KAFKA_SASL_PASSWORD"]; !ok {
		t.Error("no WASMSTREAM_KAFKA_SASL_PASSWORD (the ConfigMap's SASL_SSL example needs it)")
	}
	// The example Secret's admin token is a placeholder the host refuses:
	// a copy of the example applied as it is gives no host a known token.
	ref := env["WASMSTREAM_ADMIN_TOKEN"].ValueFrom.SecretKeyRef
	if tok, ok := secret.StringData[ref.Key]; ref.Name != secret.Name || !ok {
		t.Errorf("the example Secret %s has no %s", secret.Name, ref.Key)
	} else if err := admin.CheckToken(tok, "WASMSTREAM_ADMIN_TOKEN"); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("the example Secret's admin token %q: %v; want it refused as a placeholder", tok, err)
	}
}

// checkFleet checks what the README promises of a fleet's objects, the raw
// manifests' or the chart's: host.id from the pod's name, the secrets from
// Secrets, the probes, non-root with a read-only root filesystem,
// resources with GOMEMLIMIT below the memory limit, selectors that select
// the pods, every writable path on a volume, and a ConfigMap whose
// config.yaml wasmstream loads. It returns the container's environment.
func checkFleet(t *testing.T, ss *appsv1.StatefulSet, cm *corev1.ConfigMap, pdb *policyv1.PodDisruptionBudget, svc *corev1.Service) map[string]corev1.EnvVar {
	t.Helper()
	pod := ss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["WASMSTREAM_HOST_ID"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Error("host.id must come from the pod's name")
	}
	// The admin token, and any password or token given in the
	// environment, from a Secret.
	if _, ok := env["WASMSTREAM_ADMIN_TOKEN"]; !ok {
		t.Error("no WASMSTREAM_ADMIN_TOKEN")
	}
	for name, e := range env {
		if strings.Contains(name, "TOKEN") || strings.Contains(name, "PASSWORD") {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s must come from a Secret", name)
			}
		}
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe: want GET %s on the metrics port", what, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container must have a read-only root filesystem and no privilege escalation")
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the pod must run as non-root")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("resources: want cpu and memory requests and a memory limit")
	}
	// GOMEMLIMIT below the memory limit: the Go collector works harder
	// before the pod is killed, and what the Go runtime does not count
	// (compiled code mapped outside the heap, stacks, the binary) has room.
	if limit, err := gomemlimit(env["GOMEMLIMIT"].Value); err != nil {
		t.Errorf("GOMEMLIMIT: %v", err)
	} else if mem := c.Resources.Limits.Memory().Value(); limit > mem*9/10 || limit < mem/2 {
		t.Errorf("GOMEMLIMIT %s (%d bytes) with a memory limit of %d bytes: want 50-90%% of the limit", env["GOMEMLIMIT"].Value, limit, mem)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Error("the PodDisruptionBudget should allow one host down at a time")
	}
	labels := ss.Spec.Template.Labels
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the PodDisruptionBudget's selector %s=%s does not select the pods", k, v)
		}
	}
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service's selector %s=%s does not select the pods", k, v)
		}
	}
	if ss.Spec.ServiceName != svc.Name {
		t.Errorf("serviceName %q, the Service is %q", ss.Spec.ServiceName, svc.Name)
	}

	// Every writable path is on a volume; the config comes from the
	// ConfigMap, and is a config wasmstream loads.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts["/etc/wasmstream"] != "config" || mounts["/var/lib/wasmstream"] != "state" || mounts["/tmp"] == "" {
		t.Errorf("mounts %v", mounts)
	}
	// The modules are in the image (/opt/wasmstream/modules): here, in a
	// directory of the test's.
	dir := t.TempDir()
	text := strings.ReplaceAll(cm.Data["config.yaml"], "/opt/wasmstream/modules/", dir+"/")
	for _, m := range regexp.MustCompile(`module: (\S+)`).FindAllStringSubmatch(text, -1) {
		os.WriteFile(m[1], []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	}
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	cfg, err := config.Load(path, []string{"WASMSTREAM_HOST_ID=wasmstream-0"}, nil)
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	if !strings.HasPrefix(cfg.Admin.StoreDir, "/var/lib/wasmstream/") || !strings.HasPrefix(cfg.Host.CompileCacheDir, "/var/lib/wasmstream/") || cfg.Host.ID != "wasmstream-0" {
		t.Errorf("store %q, compile cache %q, host.id %q: want the state volume and the pod's name", cfg.Admin.StoreDir, cfg.Host.CompileCacheDir, cfg.Host.ID)
	}
	// The instances' memory budget within GOMEMLIMIT: the host refuses an
	// instance before the pod is killed.
	if limit, _ := gomemlimit(env["GOMEMLIMIT"].Value); cfg.Host.MaxInstanceMemory >= limit {
		t.Errorf("host.max_instance_memory %d is not below GOMEMLIMIT (%d bytes): the pod would be killed before the host refuses an instance", cfg.Host.MaxInstanceMemory, limit)
	}
	if grace := pod.TerminationGracePeriodSeconds; grace == nil || time.Duration(*grace)*time.Second < cfg.Shutdown.DrainTimeout+30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v: want shutdown.drain_timeout (%s) and 30 s to commit and leave the group", grace, cfg.Shutdown.DrainTimeout)
	}
	return env
}

// gomemlimit parses a GOMEMLIMIT value (a number of bytes with an
// optional B, KiB, MiB, GiB or TiB suffix, as the Go runtime reads it).
func gomemlimit(v string) (int64, error) {
	m := regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`).FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%q: want a number of bytes, KiB, MiB, GiB or TiB (a value, not the limit itself)", v)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift, nil
}

// examples are the ConfigMap config's commented examples, uncommented one
// at a time, by name: a block is the "# -- NAME: ..." lines, then the
// commented lines below them at the same indentation up to a bare "#".
func examples(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(text, "\n")
	head := regexp.MustCompile(`^(\s*)# -- ([A-Za-z_]+):`)
	for i := 0; i < len(lines); i++ {
		m := head.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, name := m[1], m[2]
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], indent+"# -- ") {
			j++
		}
		start := j
		for j < len(lines) && strings.HasPrefix(lines[j], indent+"# ") {
			j++
		}
		if j == start {
			t.Fatalf("the ConfigMap's example %s has no lines", name)
		}
		body := make([]string, 0, len(lines))
		body = append(body, lines[:start]...)
		for _, l := range lines[start:j] {
			body = append(body, indent+strings.TrimPrefix(l, indent+"# "))
		}
		body = append(body, lines[j:]...)
		out[name] = strings.Join(body, "\n")
		i = j
	}
	return out
}

// pki is a CA and a client certificate it signed, with the client's key,
// in PEM.
func pki(t *testing.T) (ca, cert, key []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka-ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "wasmstream"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
}

// TestKubernetesSecuredExamples: each secured-cluster example of the
// ConfigMap (SASL_SSL with the CA from a ConfigMap, mTLS with the key from
// a Secret), uncommented, is a config wasmstream loads; every file it names
// is in a volume the StatefulSet mounts, from an example ConfigMap or
// Secret that has that key; and with those volumes laid out as the kubelet
// lays them out (files behind ..data links; a Secret's files owned by root,
// of the pod's fsGroup, mode defaultMode|0440), the host reads them: the
// client's TLS (CA, certificate, key) and SASL are built from them.
func TestKubernetesSecuredExamples(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("laying out the volumes as the kubelet does needs chown (root)")
	}
	objs := objects(t)
	ss := objs["StatefulSet/wasmstream"].(*appsv1.StatefulSet)
	cm := objs["ConfigMap/wasmstream-config"].(*corev1.ConfigMap)
	pod := ss.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.FSGroup == nil || psc.RunAsGroup == nil {
		t.Fatal("the pod needs runAsGroup and an fsGroup: a Secret volume's files are root's, readable by the fsGroup")
	}
	podGroups := []uint32{uint32(*psc.RunAsGroup), uint32(*psc.FSGroup)}
	for _, g := range psc.SupplementalGroups {
		podGroups = append(podGroups, uint32(g))
	}
	ca, cert, key := pki(t)
	content := map[string][]byte{"ca.crt": ca, "tls.crt": cert, "tls.key": key}

	ex := examples(t, cm.Data["config.yaml"])
	for _, name := range []string{"SASL_SSL", "mTLS"} {
		if ex[name] == "" {
			t.Fatalf("the ConfigMap has no %s example (a block headed \"# -- %s:\")", name, name)
		}
	}
	for name, text := range ex {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			text := strings.ReplaceAll(text, "/opt/wasmstream/modules/", root+"/")
			for _, m := range regexp.MustCompile(`module: (\S+)`).FindAllStringSubmatch(text, -1) {
				os.WriteFile(m[1], []byte("\x00asm\x01\x00\x00\x00"), 0o644)
			}
			// The pod's environment: the Secret's values, but for an
			// optional key an example without SASL goes without (its
			// comment: a password with no mechanism is refused).
			env := []string{"WASMSTREAM_HOST_ID=wasmstream-0"}
			for _, e := range pod.Containers[0].Env {
				ref := (*corev1.SecretKeySelector)(nil)
				if e.ValueFrom != nil {
					ref = e.ValueFrom.SecretKeyRef
				}
				if ref == nil || e.Name == "WASMSTREAM_ADMIN_TOKEN" {
					continue
				}
				if ref.Optional != nil && *ref.Optional && !regexp.MustCompile(`(?m)^\s*sasl:`).MatchString(text) {
					continue
				}
				env = append(env, e.Name+"=example-value")
			}
			path := filepath.Join(root, "config.yaml")
			os.WriteFile(path, []byte(text), 0o644)
			cfg, err := config.Load(path, env, nil)
			if err != nil {
				t.Fatalf("the ConfigMap's %s example: %v", name, err)
			}
			tls := cfg.Kafka.TLS
			if !tls.Enabled || tls.CAFile == "" || tls.InsecureSkipVerify {
				t.Fatalf("%s: want TLS verified against the CA from the ConfigMap: %+v", name, tls)
			}
			switch name {
			case "SASL_SSL":
				if cfg.Kafka.SASL.Mechanism == "" || cfg.Kafka.SASL.Username == "" {
					t.Errorf("SASL_SSL: no SASL: %+v", cfg.Kafka.SASL)
				}
			case "mTLS":
				if tls.CertFile == "" || tls.KeyFile == "" {
					t.Errorf("mTLS: no client certificate: %+v", tls)
				}
			}
			// Lay out the files the config names as the kubelet would.
			for _, f := range []string{tls.CAFile, tls.CertFile, tls.KeyFile} {
				if f == "" {
					continue
				}
				mountFile(t, root, pod, f, content, func(v corev1.Volume, item string) error {
					switch {
					case v.ConfigMap != nil:
						if src, _ := objs["ConfigMap/"+v.ConfigMap.Name].(*corev1.ConfigMap); src == nil || src.Data[item] == "" {
							return fmt.Errorf("no example ConfigMap %s with key %s (deploy/kubernetes/example)", v.ConfigMap.Name, item)
						}
					case v.Secret != nil:
						if src, _ := objs["Secret/"+v.Secret.SecretName].(*corev1.Secret); src == nil || (src.StringData[item] == "" && len(src.Data[item]) == 0) {
							return fmt.Errorf("no example Secret %s with key %s (deploy/kubernetes/example)", v.Secret.SecretName, item)
						}
					}
					return nil
				})
			}
			// Read through the config loader again, the files now in
			// place under the test's root.
			os.WriteFile(path, []byte(strings.ReplaceAll(text, "/etc/wasmstream-kafka/", root+"/etc/wasmstream-kafka/")), 0o644)
			cfg, err = config.Load(path, env, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kafkaconn.Opts(cfg.Kafka, cfg.Kafka.Brokers); err != nil {
				t.Fatalf("%s: the host cannot use the mounted files: %v", name, err)
			}
		})
	}
	// The kubelet's default mode on the Secret volume would give every
	// user the key: refused.
	if secretfile.Permitted(0o644|0o440, 0, uint32(*psc.FSGroup), podGroups) {
		t.Error("a key file of mode 0644 accepted")
	}
}

// mountFile lays out the file f, which a config names, under root as the
// kubelet would on the volume pod mounts f's directory from: behind a
// ..data link, the volume's mode with group read (the kubelet under an
// fsGroup), a Secret's files owned by root, with content[base name]. has
// says whether the volume's ConfigMap or Secret holds the item. It fails t
// when f is on no volume, the volume is neither a ConfigMap nor a Secret,
// has refuses it, or a Secret's file would have a mode the host refuses
// for a secret file.
func mountFile(t *testing.T, root string, pod corev1.PodSpec, f string, content map[string][]byte, has func(v corev1.Volume, item string) error) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.FSGroup == nil || psc.RunAsGroup == nil {
		t.Fatal("the pod needs runAsGroup and an fsGroup: a Secret volume's files are root's, readable by the fsGroup")
	}
	podGroups := []uint32{uint32(*psc.RunAsGroup), uint32(*psc.FSGroup)}
	for _, g := range psc.SupplementalGroups {
		podGroups = append(podGroups, uint32(g))
	}
	var mount *corev1.VolumeMount
	for i, m := range pod.Containers[0].VolumeMounts {
		if strings.HasPrefix(f, strings.TrimSuffix(m.MountPath, "/")+"/") {
			mount = &pod.Containers[0].VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("%s is on no volume the StatefulSet mounts", f)
	}
	item := strings.TrimPrefix(f, strings.TrimSuffix(mount.MountPath, "/")+"/")
	var v corev1.Volume
	for _, vol := range pod.Volumes {
		if vol.Name == mount.Name {
			v = vol
		}
	}
	mode, secret := fs.FileMode(0o644), false // the kubelet's default mode
	var items []corev1.KeyToPath
	switch {
	case v.ConfigMap != nil:
		if v.ConfigMap.DefaultMode != nil {
			mode = fs.FileMode(*v.ConfigMap.DefaultMode)
		}
		items = v.ConfigMap.Items
	case v.Secret != nil:
		if v.Secret.DefaultMode != nil {
			mode = fs.FileMode(*v.Secret.DefaultMode)
		}
		items, secret = v.Secret.Items, true
	default:
		t.Fatalf("%s is on volume %s, neither a ConfigMap nor a Secret", f, mount.Name)
	}
	// A volume that lists its items has those paths only.
	if items != nil {
		found := false
		for _, it := range items {
			if it.Path == item {
				found = true
				if it.Mode != nil {
					mode = fs.FileMode(*it.Mode)
				}
			}
		}
		if !found {
			t.Fatalf("%s: volume %s lists its items, and not %s", f, mount.Name, item)
		}
	}
	if err := has(v, item); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	mode |= 0o440 // the kubelet under an fsGroup: group read on every file of the volume
	if secret && !secretfile.Permitted(mode, 0, uint32(*psc.FSGroup), podGroups) {
		t.Fatalf("%s would be root:%d mode %04o: the host refuses it as a secret file (want defaultMode 0400 on volume %s)", f, *psc.FSGroup, mode, mount.Name)
	}
	// The files behind ..data, as the kubelet's atomic writer makes them.
	// The test's own group stands for the fsGroup (this process is not in
	// the pod's).
	dir := filepath.Join(root, mount.MountPath)
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000000")
	os.MkdirAll(data, 0o755)
	os.Symlink(filepath.Base(data), filepath.Join(dir, "..data"))
	p := filepath.Join(data, item)
	if err := os.WriteFile(p, content[filepath.Base(item)], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 0, os.Getegid()); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	os.Symlink(filepath.Join("..data", item), filepath.Join(dir, item))
}

// The image is built with deploy/build-static.sh (what image_build.sh
// runs here) and runs as a non-root user, with its state on a volume.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"sh deploy/build-static.sh", "\nFROM gcr.io/distroless/static", "\nUSER 65532:65532", `VOLUME ["/var/lib/wasmstream"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if strings.Count(df, "\nFROM ") != 2 {
		t.Error("want a two-stage build")
	}
}

// The unit passes systemd-analyze verify (with ExecStart on a binary that
// exists here).
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	b, err := os.ReadFile("../systemd/wasmstream.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "wasmstream.service")
	os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/local/bin/wasmstream"), []byte("/bin/true")), 0o644)
	out, err := exec.Command(sa, "verify", unit).CombinedOutput()
	// verify may warn about the host it runs on (no D-Bus in a container);
	// what concerns the unit names it.
	if err != nil && bytes.Contains(out, []byte("wasmstream.service")) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("wasmstream.service:")) {
		t.Fatalf("systemd-analyze verify:\n%s", out)
	}
	t.Logf("systemd-analyze verify: %v %s", err, out)
}

// The strict decode the manifests pass does refuse a misspelt field.
func TestStrictDecodeRefusesUnknownFields(t *testing.T) {
	if err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: StatefulSet\nspec: {replicaz: 3}\n"), &appsv1.StatefulSet{}); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}
