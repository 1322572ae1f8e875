//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The tests here run the wasmstream binary under an address-space limit,
// as a container's memory limit would, against modules that try to make the
// host allocate gigabytes through tables. The host must refuse or contain
// each one and stay up; a process that died would show "fatal error: out of
// memory" in its log.

const addressSpaceKB = 4_000_000 // ulimit -v

// limited runs the wasmstream binary under ulimit -v.
func limited(args ...string) *exec.Cmd {
	return exec.Command("bash", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressSpaceKB), binary}, args...)...)
}

func startLimited(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, limited(args...))
}

func writeModule(t *testing.T, m wt.Module) string {
	p := filepath.Join(t.TempDir(), "hostile.wasm")
	if err := os.WriteFile(p, m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// growOrTrap grows table 0 by 2^30 elements (8 GiB) and traps if the grow
// failed: the body of an initialiser that insists.
func growOrTrap() []byte {
	b := wt.GrowTable(0, 1<<30)
	b = append(b, wt.I32Const(-1)...)
	b = append(b, 0x46, 0x04, 0x40) // i32.eq if
	b = append(b, wt.Unreachable...)
	return append(b, 0x0b)
}

// TestHostileValidate: validate refuses a module declaring 8 tables of 2^27
// elements (8 GiB per instance) with a message, and exits 1.
func TestHostileValidate(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	for i := 0; i < 8; i++ {
		m.Tables = append(m.Tables, wt.Table{Min: 1 << 27})
	}
	out, err := limited("validate", writeModule(t, m)).CombinedOutput()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err == nil {
		code = 0
	}
	if code != 1 || !strings.Contains(string(out), "limits.table_elements") || strings.Contains(string(out), "fatal error") {
		t.Fatalf("validate exited %d (want 1 naming limits.table_elements):\n%s", code, tail(string(out), 20))
	}
	t.Logf("%s", out)

	// An initialiser growing its table is refused by validate and by run.
	m = wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 1}}
	m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportInitialize, Body: growOrTrap()})
	mod := writeModule(t, m)
	out, err = limited("validate", mod).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unreachable") || strings.Contains(string(out), "fatal error") {
		t.Fatalf("validate of a table-growing initialiser: %v\n%s", err, tail(string(out), 20))
	}
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	kafkatest.CreateTopic(t, brokers, 1, n+"-in", n+"-out", n+"-dlq")
	p := startLimited(t, "run", "--config", writeConfig(t, brokers, n, mod, n+"-in", n+"-out", n+"-dlq", ""))
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("run with a table-growing initialiser did not exit")
	}
	if code := p.cmd.ProcessState.ExitCode(); code == 0 || strings.Contains(p.logText(), "fatal error") || !strings.Contains(p.logText(), "unreachable") {
		t.Fatalf("run exited %d; want a refusal naming the trap, not a crash", code)
	}
}

// TestHostileTableGrowRecord: a record whose handler grows a table by 2^30
// elements is dead-lettered (the grow returns -1 and the guest fails it);
// the host stays up and the healthy records around it are processed.
func TestHostileTableGrowRecord(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	output := abi.AppendOutput(nil, &abi.Output{Partition: -1, Value: []byte("ok")})
	// on_record(handle, len): a record longer than 500 bytes is the bomb:
	// table.grow(2^30) and status fail (3) if it returned -1, ok otherwise.
	// Any other record emits output (copied from a passive data segment).
	var body []byte
	body = append(body, wt.LocalGet(1)...)
	body = append(body, wt.I32Const(500)...)
	body = append(body, 0x4b, 0x04, 0x40) // i32.gt_u if
	body = append(body, wt.GrowTable(0, 1<<30)...)
	body = append(body, wt.I32Const(-1)...)
	body = append(body, 0x46, 0x04, 0x40) // i32.eq if
	body = append(body, wt.I32Const(3)...)
	body = append(body, 0x0f, 0x0b) // return end
	body = append(body, wt.I32Const(0)...)
	body = append(body, 0x0f, 0x0b) // return end
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(int32(len(output)))...)
	body = append(body, 0xfc, 8, 0, 0) // memory.init 0
	body = append(body, wt.LocalGet(0)...)
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(int32(len(output)))...)
	body = append(body, wt.Call(0)...) // emit
	body = append(body, wt.Drop...)
	body = append(body, wt.I32Const(0)...)
	m := wt.Minimal(body, wt.Import{Module: abi.HostModule, Name: abi.ImportEmit, Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}})
	m.Tables = []wt.Table{{Min: 1}}
	m.Data = [][]byte{output}

	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	const count, bomb = 200, 100
	kafkatest.Produce(t, brokers, in, count, func(i int) string {
		if i == bomb {
			return strings.Repeat("B", 1000)
		}
		return fmt.Sprint(i)
	})
	p := startLimited(t, "run", "--config", writeConfig(t, brokers, n, writeModule(t, m), in, out, dlq, ""))
	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, 2*time.Minute, "the bomb record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if v := string(dl.Recs[0].Value); len(v) != 1000 {
		t.Fatalf("dead letter %q, want the bomb record", v[:min(len(v), 40)])
	}
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "every healthy record's output", func(rs []*kgo.Record) bool { return len(rs) >= count-1 })
	if !p.alive() || strings.Contains(p.logText(), "fatal error") {
		t.Fatal("the host died")
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
