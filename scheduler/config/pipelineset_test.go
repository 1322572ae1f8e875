package config

import (
	"strings"
	"testing"
)

const twoPipelines = `
kafka:
  brokers: [embedded]
  group: g
pipelines:
  - name: upper
    module: m.wasm
    inputs: [in]
    output: out
    dead_letter_topic: in.dlq
  - name: look.up
    module: m.wasm
    inputs: [in]
    output: profiles
    dead_letter_topic: profiles.dlq
    env:
      LOOKUP_URL: http://127.0.0.1:18089/users/
    async:
      http:
        allow_hosts: [127.0.0.1:18089]
`

// TestSetPipelineByName: --set pipelines.<name>.<key>=value sets the key
// of the pipeline of that name (a name with a dot too), a map's entry and
// a list, and leaves the other pipelines as they are.
func TestSetPipelineByName(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, twoPipelines), nil, []string{
		"pipelines.look.up.env.LOOKUP_URL=http://127.0.0.1:28089/users/",
		"pipelines.look.up.async.http.allow_hosts=127.0.0.1:28089",
		"pipelines.upper.limits.record_timeout=3s",
		"pipelines.upper.env.GREETING=hi",
	})
	if err != nil {
		t.Fatal(err)
	}
	up, look := &c.Pipelines[0], &c.Pipelines[1]
	if got := look.Env["LOOKUP_URL"]; got != "http://127.0.0.1:28089/users/" {
		t.Errorf("env.LOOKUP_URL = %q", got)
	}
	if got := look.Async.HTTP.AllowHosts; len(got) != 1 || got[0] != "127.0.0.1:28089" {
		t.Errorf("allow_hosts = %q", got)
	}
	if up.Limits.RecordTimeout.String() != "3s" || look.Limits.RecordTimeout == up.Limits.RecordTimeout {
		t.Errorf("record_timeout: upper %s, look.up %s", up.Limits.RecordTimeout, look.Limits.RecordTimeout)
	}
	if up.Env["GREETING"] != "hi" || look.Env["GREETING"] != "" {
		t.Errorf("env.GREETING: upper %q, look.up %q", up.Env["GREETING"], look.Env["GREETING"])
	}
}

// TestSetPipelineBadKeysNamed: a pipeline no one has, a key no pipeline
// has, the name itself and a secret are each a problem naming the --set
// key, without its value; every one reported at once.
func TestSetPipelineBadKeysNamed(t *testing.T) {
	t.Parallel()
	_, err := Load(write(t, twoPipelines), nil, []string{
		"pipelines.nosuch.limits.record_timeout=SECRETVALUE1",
		"pipelines.upper.limits.record_timout=SECRETVALUE2",
		"pipelines.upper.name=SECRETVALUE3",
		"pipelines.0.output=SECRETVALUE4",
	})
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	for _, want := range []string{
		"--set pipelines.nosuch.limits.record_timeout: no pipeline of that name (want pipelines.<name>.<key>=value; the pipelines: look.up, upper)",
		"--set pipelines.upper.limits.record_timout: pipeline upper has no key limits.record_timout",
		"did you mean pipelines.upper.limits.record_timeout?",
		"--set pipelines.upper.name: a pipeline's name is what names it here",
		"--set pipelines.0.output: no pipeline of that name",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SECRETVALUE") {
		t.Errorf("a value given is shown:\n%s", msg)
	}
}

// TestSetPipelineInvalidValueNamed: a value the pipeline cannot take is
// refused by the validation of the file's, naming the pipeline's key.
func TestSetPipelineInvalidValueNamed(t *testing.T) {
	t.Parallel()
	_, err := Load(write(t, twoPipelines), nil, []string{"pipelines.upper.limits.record_timeout=notaduration"})
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].limits.record_timeout") {
		t.Fatalf("got %v, want the key pipelines[0].limits.record_timeout named", err)
	}
}
