package main

// The version of wasmstream a generated project is tied to: its SDK is a
// snapshot of a checkout (sdk/), and its make test and CI run the
// wasmstream command, which must be the same version, or the vectors and
// the ABI checks of one release run against the host of another. The
// project records it in .wasmstream-version; its CI installs that version
// and its Makefile runs it (go run) when no wasmstream is on PATH: no path
// into the checkout, which the project does not build beside.

import (
	"bytes"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
)

// versionFile is the project's file of the wasmstream version its SDK is.
const versionFile = ".wasmstream-version"

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// sdkVersion is the version of wasmstream whose SDK a project gets from
// the checkout co: its commit, which go install resolves, with a note
// when the checkout has changes that commit lacks. Without a checkout (a
// C project), or outside a git clone, it is this command's own: its
// release (main.version) or the commit it was built from; "latest", with
// a note, when neither is known.
func sdkVersion(co string) (ver, note string) {
	if co != "" {
		if out, err := exec.Command("git", "-C", co, "rev-parse", "HEAD").Output(); err == nil && commitRE.Match(bytes.TrimSpace(out)) {
			ver = string(bytes.TrimSpace(out))
			if st, err := exec.Command("git", "-C", co, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
				note = "the checkout " + co + " has changes not committed: sdk/ holds them, and the wasmstream " + ver[:12] + " that the project's CI installs (" + versionFile + ") does not; commit and push them, then write the new commit in " + versionFile
			}
			return ver, note
		}
	}
	if strings.HasPrefix(version, "v") {
		return version, ""
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if commitRE.MatchString(rev) && !dirty {
			return rev, ""
		}
	}
	return "latest", "the version of wasmstream the project is made from is unknown (no git clone, and this command is a development build): its CI installs wasmstream@latest; write the release or commit in " + versionFile
}
