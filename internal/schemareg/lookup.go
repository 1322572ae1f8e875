package schemareg

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// SchemaByVersion returns the schema subject holds at version (-1: the
// latest) and the version it is: one request to the registry, the schema
// compiled once per id (the cache by id). A registry that does not answer
// is an *Error of Kind Unavailable; no such subject or version, NotFound.
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (*Schema, int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	what := fmt.Sprintf("subject %s version %s", subject, versionName(version))
	ss, err := c.sr.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return nil, 0, c.classify(err, 0, subject, version, what)
	}
	s, err := c.cached(ss.ID, func() (*Schema, error) { return c.compile(ctx, ss.ID, ss.Schema) })
	if err != nil {
		if se, ok := err.(*Error); ok && se.Subject == "" {
			se.Subject, se.Version = subject, version
		}
		return nil, 0, err
	}
	return s, ss.Version, nil
}

// RefreshPeriod is how long an answer about a subject's latest version
// may be used (schema_registry.refresh_period).
func (c *Client) RefreshPeriod() time.Duration { return c.cfg.RefreshPeriod }

// Register registers s under subject and returns its id and its version
// under the subject. A schema the registry refuses (incompatible with the
// subject's, or invalid) is an *Error of Kind BadSchema with the
// registry's message; a registry that does not answer, Unavailable.
func (c *Client) Register(ctx context.Context, subject string, s sr.Schema) (id, version int, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	ss, err := c.sr.CreateSchema(ctx, subject, s)
	if err != nil {
		return 0, 0, c.classify(err, 0, subject, -1, "register a schema ("+s.Type.String()+") under subject "+subject)
	}
	return ss.ID, ss.Version, nil
}
