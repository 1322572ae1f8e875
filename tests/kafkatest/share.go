package kafkatest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SetGroupConfigs sets configs of a group (IncrementalAlterConfigs on the
// GROUP resource), e.g. a share group's share.auto.offset.reset and
// share.record.lock.duration.ms, before its members join.
func SetGroupConfigs(t testing.TB, brokers []string, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kvs[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, Client(t, brokers))
	if err != nil {
		t.Fatalf("group %s configs: %v", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("group %s configs: %v %s", group, err, msg)
		}
	}
}

// FakeShare starts an in-process broker whose share groups lock records for
// lock (group.share.record.lock.duration.ms, looked at every 100 ms) and
// returns its address.
func FakeShare(t testing.TB, lock time.Duration) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{
		"group.share.record.lock.duration.ms": strconv.FormatInt(lock.Milliseconds(), 10),
		"share.record.lock.sweep.interval.ms": "100",
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
