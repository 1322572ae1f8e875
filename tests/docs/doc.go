// Package docs holds checks that the code and its two maps agree: every
// citation of RATIONALE.md or DESIGN.md in Go code names a heading that
// exists, and every lock order a comment states is the one DESIGN.md's
// "Lock order" holds. They run with the unit tests (no broker, no build
// tag).
package docs
