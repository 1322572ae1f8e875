package config

import (
	"strings"
	"testing"
)

// TestRegistryPrefixDefault: the fleet registry's topics start with
// <kafka.group>. as every name the host makes does (README.md, "ACLs the
// host needs"; before: wasmstream.<kafka.group>, outside that prefix); the
// previous default is kept for the registry to find a fleet's topics there,
// and a prefix set explicitly has no previous default.
func TestRegistryPrefixDefault(t *testing.T) {
	withGroup := strings.Replace(good, "group: wasmstream-demo", "group: sec-app", 1)
	c, err := Load(write(t, withGroup), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RegistryPrefix(); got != "sec-app.registry" {
		t.Errorf("default registry prefix %q, want sec-app.registry", got)
	}
	if got := c.OldDefaultRegistryPrefix(); got != "wasmstream.sec-app" {
		t.Errorf("previous default %q, want wasmstream.sec-app", got)
	}
	c, err = Load(write(t, withGroup), nil, []string{"admin.registry_topic_prefix=fleet-x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.RegistryPrefix() != "fleet-x" || c.OldDefaultRegistryPrefix() != "" {
		t.Errorf("explicit prefix: %q, previous default %q", c.RegistryPrefix(), c.OldDefaultRegistryPrefix())
	}
}
