package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/internal/verlabel"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// adminClient calls a running host's admin API.
type adminClient struct {
	url, token string
	http       *http.Client
}

func (c *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", config.DefaultFile, "config file of the host (admin.listen, admin.token_file)")
	fs.StringVar(&c.url, "admin", "", "admin API URL (default: http:// + the config's admin.listen)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the token (default: $WASMSTREAM_ADMIN_TOKEN, then the config's admin.token_file)")
}

type adminFlags struct {
	config, url, tokenFile string
}

// client resolves the API's URL and token from the flags, the environment
// and the config file.
func (c *adminFlags) client() (*adminClient, error) {
	url, tokenFile := c.url, c.tokenFile
	token := strings.TrimSpace(os.Getenv("WASMSTREAM_ADMIN_TOKEN"))
	if url == "" || (token == "" && tokenFile == "") {
		cfg, err := config.Load(c.config, os.Environ(), nil)
		if err != nil {
			return nil, fmt.Errorf("%v (or give --admin and --token-file)", err)
		}
		if url == "" {
			url = "http://" + cfg.Admin.Listen
		}
		if token == "" && tokenFile == "" {
			tokenFile = cfg.AdminPath(cfg.Admin.TokenFile)
		}
	}
	if token == "" {
		if tokenFile == "" {
			return nil, fmt.Errorf("no token: set WASMSTREAM_ADMIN_TOKEN or --token-file")
		}
		t, err := admin.ReadTokenFile(tokenFile, "token file")
		if err != nil {
			return nil, err
		}
		token = t
	}
	return &adminClient{url: strings.TrimSuffix(url, "/"), token: token, http: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// call sends a request and decodes a JSON answer into out; an error answer
// becomes an error with the API's message.
func (c *adminClient) call(method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, c.url+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w (is the host running with the admin API on?)", c.url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s (%s)", e.Error, resp.Status)
		}
		return fmt.Errorf("%s: %.300s", resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

const deployUsage = `Usage:
  wasmstream deploy --pipeline NAME module.wasm     upload a module and switch the pipeline to it
  wasmstream deploy --pipeline NAME --digest SHA256  switch to a version uploaded before
  wasmstream deploy --pipeline NAME --rollback       switch back to the version before the current one
  wasmstream deploy --pipeline NAME --upload-only module.wasm
  wasmstream deploy --pipeline NAME --label v2.3.1 module.wasm   name the version

Calls the admin API of a running host. The module is validated and compiled
before it is accepted; a module that does not fit is refused with the reason
and the running version keeps running. The switch is a hot swap: records not
yet started run on the new version, records in progress finish on the old
one; nothing is lost or processed twice because of it.

Flags:
`

// deployCmd is `wasmstream deploy`'s flags.
type deployCmd struct {
	af                                   adminFlags
	pipeline, digest, canary, label      string
	rollback, uploadOnly, promote, abort bool
	waitAll                              bool
	module                               string // the module file, "" for none
	modules                              int    // how many module files were given
	stdout, stderr                       io.Writer
}

func cmdDeploy(args []string, stdout, stderr io.Writer) int {
	d := &deployCmd{stdout: stdout, stderr: stderr}
	if code := d.parse(args); code >= 0 {
		return code
	}
	if code := d.validate(); code >= 0 {
		return code
	}
	c, err := d.af.client()
	if err != nil {
		printErr(stderr, "wasmstream deploy", err)
		return 1
	}
	start := time.Now()
	view, done, err := d.send(c)
	if err != nil {
		printErr(stderr, "wasmstream deploy", err)
		return 1
	}
	if !done {
		d.report(view, start)
	}
	return 0
}

// parse reads the flags, which may follow the module file, into d; it
// returns the exit code when they do not parse, else -1.
func (d *deployCmd) parse(args []string) int {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(d.stderr)
	d.af.register(fs)
	fs.StringVar(&d.pipeline, "pipeline", "", "the pipeline to deploy to (required)")
	fs.StringVar(&d.digest, "digest", "", "deploy this stored version")
	fs.BoolVar(&d.rollback, "rollback", false, "deploy the version before the current one")
	fs.BoolVar(&d.uploadOnly, "upload-only", false, "upload and validate, do not deploy")
	fs.StringVar(&d.canary, "canary", "", "with the fleet registry: run the module on this share of the partitions (e.g. 10%) beside the deployed version")
	fs.BoolVar(&d.promote, "promote", false, "make the running canary's version the pipeline's on every partition")
	fs.BoolVar(&d.abort, "abort", false, "end the running canary: every partition back on the deployed version")
	fs.StringVar(&d.label, "label", "", "name the version deployed or uploaded (e.g. v2.3.1; at most 63 letters, digits, '.', '_', '-'): shown by processors, the admin API, the dashboard and as the label of the wasmstream_version_* metrics")
	fs.BoolVar(&d.waitAll, "wait-all", false, "with the fleet registry: answer once every live host of the group runs the version (else once this host does)")
	fs.Usage = func() { fmt.Fprint(d.stderr, deployUsage); fs.PrintDefaults() }
	if err := fs.Parse(interleave(args, fs)); err != nil {
		return 2
	}
	d.modules, d.module = fs.NArg(), fs.Arg(0)
	return -1
}

// validate checks that the flags ask for one thing; it returns the exit
// code when they do not, else -1.
func (d *deployCmd) validate() int {
	if d.pipeline == "" {
		fmt.Fprintln(d.stderr, "wasmstream deploy: --pipeline is required")
		return 2
	}
	modes := 0
	for _, b := range []bool{d.modules > 0, d.digest != "", d.rollback, d.promote, d.abort} {
		if b {
			modes++
		}
	}
	if modes != 1 || d.modules > 1 {
		fmt.Fprintln(d.stderr, "wasmstream deploy: give one module file, or --digest, --rollback, --promote or --abort")
		return 2
	}
	if err := verlabel.Check(d.label); err != nil {
		fmt.Fprintf(d.stderr, "wasmstream deploy: --label: %v\n", err)
		return 2
	}
	if d.label != "" && d.modules == 0 && d.digest == "" {
		fmt.Fprintln(d.stderr, "wasmstream deploy: --label names a module file or a --digest deployed")
		return 2
	}
	if d.canary != "" && d.modules == 0 {
		fmt.Fprintln(d.stderr, "wasmstream deploy: --canary needs a module file")
		return 2
	}
	return -1
}

// send asks the admin API for the deploy, the rollback or the canary's end
// and returns the pipeline as it answers, and done when it printed the
// answer itself.
func (d *deployCmd) send(c *adminClient) (view admin.PipelineView, done bool, err error) {
	wait := ""
	if d.waitAll {
		wait = "?wait=all"
	}
	switch {
	case d.promote, d.abort:
		what := map[bool]string{true: "promote", false: "abort"}[d.promote]
		if err = c.call("POST", "/v1/pipelines/"+d.pipeline+"/canary/"+what, "", nil, &view); err == nil {
			fmt.Fprintf(d.stdout, "%s: canary %sed; the pipeline runs %s on every partition\n", termsafe.Line(d.pipeline), strings.TrimSuffix(what, "e"), termsafe.Line(view.Active))
			return view, true, nil
		}
	case d.rollback:
		err = c.call("POST", "/v1/pipelines/"+d.pipeline+"/rollback"+wait, "", nil, &view)
	case d.digest != "":
		b, _ := json.Marshal(map[string]string{"digest": d.digest, "label": d.label})
		err = c.call("POST", "/v1/pipelines/"+d.pipeline+"/deploy"+wait, "application/json", bytes.NewReader(b), &view)
	default:
		return d.upload(c)
	}
	return view, false, err
}

// upload sends the module file, to deploy it, to start a canary with it or
// only to store it.
func (d *deployCmd) upload(c *adminClient) (view admin.PipelineView, done bool, err error) {
	wasm, err := os.ReadFile(d.module)
	if err != nil {
		return view, false, err
	}
	var res admin.UploadResult
	q := "?deploy=true"
	if d.waitAll {
		q += "&wait=all"
	}
	if d.canary != "" {
		q = "?canary=" + url.QueryEscape(d.canary)
	}
	if d.uploadOnly {
		q = "?"
	}
	if d.label != "" {
		q += "&label=" + url.QueryEscape(d.label)
	}
	if err = c.call("POST", "/v1/pipelines/"+d.pipeline+"/modules"+q, "application/wasm", bytes.NewReader(wasm), &res); err != nil {
		return view, false, err
	}
	if d.uploadOnly {
		fmt.Fprintf(d.stdout, "uploaded %s (%d bytes) for %s; deploy it with --digest %s\n", termsafe.Line(res.Digest), res.Size, termsafe.Line(d.pipeline), termsafe.Line(res.Digest))
		return view, true, nil
	}
	if res.Canary > 0 {
		fmt.Fprintf(d.stdout, "%s: canary %s runs on %d%% of the partitions across the fleet; finish with --promote or --abort\n", termsafe.Line(d.pipeline), termsafe.Line(res.Digest), res.Canary)
		return view, true, nil
	}
	view.Active = res.Digest
	return view, false, nil
}

// report says which version the pipeline runs now, and how long the
// switch took.
func (d *deployCmd) report(view admin.PipelineView, start time.Time) {
	named := ""
	if view.Label != "" {
		named = " (" + termsafe.Line(view.Label) + ")"
	} else if d.label != "" {
		named = " (" + d.label + ")"
	}
	fmt.Fprintf(d.stdout, "%s now runs %s%s (switched in %s)\n", termsafe.Line(d.pipeline), termsafe.Line(view.Active), named, time.Since(start).Round(time.Millisecond))
	if d.waitAll {
		fmt.Fprintf(d.stdout, "every live host of the group runs it\n")
	}
}

func cmdProcessors(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processors", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: wasmstream processors [--config F] [--json]\n\nLists each pipeline of a running host, the module version it runs and the\nversions stored for it (via the admin API).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := af.client()
	if err != nil {
		printErr(stderr, "wasmstream processors", err)
		return 1
	}
	var views []admin.PipelineView
	if err := c.call("GET", "/v1/pipelines", "", nil, &views); err != nil {
		printErr(stderr, "wasmstream processors", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(termsafe.JSONWriter(stdout))
		enc.SetIndent("", "  ")
		enc.Encode(views)
		return 0
	}
	// Everything below comes from the API, and much of it from the fleet's
	// registry topics, which any host (or anyone who can write to them)
	// fills: every field is escaped (termsafe).
	line := termsafe.Line
	for _, v := range views {
		fmt.Fprintf(stdout, "%s  runs %s%s since %s\n", line(v.Name), short(v.Active), labelled(v.Label), v.Deployed.Local().Format(time.DateTime))
		if f := v.Fleet; f != nil {
			if f.Canary != nil {
				fmt.Fprintf(stdout, "  canary: %s%s on %d%% of the partitions since %s\n", short(f.Canary.Digest), labelled(f.Canary.Label), f.Canary.Percent, f.Canary.At.Local().Format(time.DateTime))
			} else if f.Aborted != "" {
				fmt.Fprintf(stdout, "  last canary aborted: %s\n", line(f.Aborted))
			}
			if f.Deployed == "" {
				fmt.Fprintf(stdout, "  fleet: nothing deployed through the registry (each host runs its config's module)\n")
			} else {
				fmt.Fprintf(stdout, "  fleet: deployed %s%s by %s at %s\n", short(f.Deployed), labelled(f.Label), line(f.By), f.At.Local().Format(time.DateTime))
			}
			hosts := slices.Sorted(maps.Keys(f.Hosts))
			for _, h := range hosts {
				note := ""
				if f.Deployed != "" && f.Hosts[h] != f.Deployed {
					note = "  (not the deployed version)"
				}
				if fl, ok := f.Failed[h]; ok {
					note += fmt.Sprintf("  cannot run %s: %s", short(fl.Digest), line(fl.Error))
				}
				fmt.Fprintf(stdout, "    host %-20s runs %s%s\n", line(h), short(f.Hosts[h]), note)
			}
			if f.NotListed > 0 {
				fmt.Fprintf(stdout, "    and %d more live hosts, not listed (%d in all)\n", f.NotListed, f.LiveHosts)
			}
		}
		for _, m := range v.Versions {
			mark := " "
			if m.Digest == v.Active {
				mark = "*"
			}
			fmt.Fprintf(stdout, "  %s %s  %-12s  %8d bytes  %-8s  added %s\n", mark, line(m.Digest), line(m.Label), m.Size, line(m.Source), m.Added.Local().Format(time.DateTime))
		}
	}
	return 0
}

// labelled is " (label)", escaped, or "" for no label.
func labelled(label string) string {
	if label == "" {
		return ""
	}
	return " (" + termsafe.Line(label) + ")"
}

// short is a digest's first 12 characters, escaped (it may come from a
// registry record).
func short(d string) string {
	if len(d) > 12 {
		d = d[:12]
	}
	return termsafe.Line(d)
}

// interleave moves flags that follow positional arguments in front of them,
// so that "deploy m.wasm --pipeline p" parses.
func interleave(args []string, fs *flag.FlagSet) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if f := fs.Lookup(name); f != nil && !strings.Contains(name, "=") {
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !(ok && bf.IsBoolFlag()) && i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}
