package config

import (
	"strings"
	"testing"
)

// A stateful pipeline needs serialised keys, one input, one owner per
// partition and no retry topics; each refusal names its key.
func TestStateCombinations(t *testing.T) {
	with := func(keys string) string { return strings.Replace(good, "limits:", keys+"\n    limits:", 1) }
	on := "state: {enabled: true}\n    retry: {mode: inline}"
	c, err := Load(write(t, with(on)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Pipelines[0].State
	if st.Changelog != "wasmstream-demo.uppercase.changelog" || st.MaxValueBytes != 64<<10 || st.MaxBytes != 1<<30 || st.Dir != Auto {
		t.Fatalf("defaults: %+v", st)
	}
	if _, err := Load(write(t, with(on+"\n    ordering: key")), nil, nil); err != nil {
		t.Fatalf("ordering: key: %v", err)
	}
	if _, err := Load(write(t, with("state: {enabled: true}\n    retry: {max_attempts: 1}")), nil, nil); err != nil {
		t.Fatalf("retry.max_attempts: 1: %v", err)
	}
	two := strings.Replace(with(on), "inputs: [demo-in]", "inputs: [demo-in, other]", 1)
	if _, err := Load(write(t, two), nil, nil); err == nil || !strings.Contains(err.Error(), "pipelines[0].inputs: 2 topics with state.enabled") {
		t.Errorf("two inputs: %v", err)
	}
	for _, c := range []struct{ keys, want string }{
		{on + "\n    ordering: none", "pipelines[0].ordering: none with state.enabled"},
		{"state: {enabled: true}", "pipelines[0].retry.mode: topics with state.enabled"},
		{on + "\n    ordering: none\n    consume: share", "pipelines[0].consume: share with state.enabled"},
		{"state: {enabled: true, max_value_bytes: 0}\n    retry: {mode: inline}", ""}, // 0 is unset: the default
		{"state: {enabled: true, max_value_bytes: 2000000}\n    retry: {mode: inline}", "pipelines[0].state.max_value_bytes: 2000000"},
		{"state: {enabled: true, max_bytes: 1048576}\n    retry: {mode: inline}", ""},
		{"state: {enabled: true, max_bytes: 66559}\n    retry: {mode: inline}", "pipelines[0].state.max_bytes: 66559: want at least"},
		{"state: {enabled: true, max_bytes: -1}\n    retry: {mode: inline}", "max_bytes"},
		{"state: {enabled: true, changelog: demo-out}\n    retry: {mode: inline}", "pipelines[0].state.changelog: \"demo-out\" must be a topic of its own"},
		{"state: {enabled: true, restore_timeout: 10ms}\n    retry: {mode: inline}", "pipelines[0].state.restore_timeout: 10ms"},
	} {
		_, err := Load(write(t, with(c.keys)), nil, nil)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.keys, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.keys, err, c.want)
		}
	}
}
