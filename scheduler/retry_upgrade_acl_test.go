package scheduler

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/logbuf"
)

// TestOldRetryTopicsUnderACLsQuiet: a principal given only the ACLs of the
// current names may not describe the retry topics of the previous default
// prefix (the brokers answer TOPIC_AUTHORIZATION_FAILED): its retry workers
// cannot have read them under these ACLs, so the host starts and says
// nothing of a prefix the user may never have used (it was said at every
// start).
func TestOldRetryTopicsUnderACLsQuiet(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the cleanups CreateTopic registers
	brokers := c.ListenAddrs()
	host, port, _ := net.SplitHostPort(brokers[0])
	p, _ := strconv.Atoi(port)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	old := "p.retry." // the previous default prefix of pipeline p
	denied := 0
	c.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic == nil || !strings.HasPrefix(*req.Topics[0].Topic, old) {
			return nil, nil, false
		}
		denied++
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
		for _, rt := range req.Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq", "    retry: {max_attempts: 2, backoff: [300ms]}", "")
	var logs logbuf.Buffer
	r, err := NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("the host did not start: %v", err)
	}
	r.Stop(context.Background())
	if denied == 0 {
		t.Fatal("the retry topics of the previous default prefix were not asked for")
	}
	if s := logs.String(); strings.Contains(s, "previous default prefix") || strings.Contains(s, "="+old) {
		t.Errorf("the start's log speaks of the previous default prefix:\n%s", s)
	}
}
