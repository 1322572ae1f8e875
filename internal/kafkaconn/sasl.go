package kafkaconn

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wasmstream/wasmstream/internal/secretfile"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// maxSecretBytes bounds a password or token file.
const maxSecretBytes = 64 << 10

// passwordMechanism is PLAIN or SCRAM. A password_file is read at every
// authentication, so a rotated password is taken by the next connection;
// it is read once here too, so a missing or exposed file fails at start.
func passwordMechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	password := func() (string, error) {
		if s.PasswordFile == "" {
			return s.Password, nil
		}
		b, err := secretfile.Read(s.PasswordFile, "kafka.sasl.password_file", "the Kafka password", maxSecretBytes)
		if err != nil {
			return "", err
		}
		// A trailing newline (echo > file) is no part of the password.
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if _, err := password(); err != nil {
		return nil, err
	}
	switch s.Mechanism {
	case "PLAIN":
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := password()
			return plain.Auth{User: s.Username, Pass: pw}, err
		}), nil
	case "SCRAM-SHA-256":
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			pw, err := password()
			return scram.Auth{User: s.Username, Pass: pw}, err
		}), nil
	}
	return scram.Sha512(func(context.Context) (scram.Auth, error) {
		pw, err := password()
		return scram.Auth{User: s.Username, Pass: pw}, err
	}), nil
}

// oauthMechanism sends the token in token_file, read at every
// authentication: whatever obtains tokens (a sidecar, a cron job) replaces
// the file and the next connection, or the re-authentication the broker
// asks for when a session's token expires, takes the new one.
func oauthMechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	token := func() (string, error) {
		b, err := secretfile.Read(s.TokenFile, "kafka.sasl.token_file", "the OAuth token", maxSecretBytes)
		if err != nil {
			return "", err
		}
		t := strings.TrimSpace(string(b))
		if exp, ok := jwtExpiry(t); ok && !exp.After(time.Now()) {
			return "", fmt.Errorf("kafka.sasl.token_file: the OAuth token in %s expired at %s (%s ago): whatever refreshes the file has stopped, or wrote an old token", s.TokenFile, exp.UTC().Format(time.RFC3339), time.Since(exp).Round(time.Second))
		}
		return t, nil
	}
	if _, err := token(); err != nil {
		return nil, err
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		t, err := token()
		return oauth.Auth{Zid: s.Username, Token: t}, err
	}), nil
}

// jwtExpiry is the exp claim of a JWT, if t is one and has it. The token is
// not verified (the broker does that): the expiry only lets the host say
// "expired" instead of the broker's bare refusal.
func jwtExpiry(t string) (time.Time, bool) {
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	sec := int64(*claims.Exp)
	return time.Unix(sec, int64((*claims.Exp-float64(sec))*1e9)), true
}

// awsMechanism signs with AWS credentials found as the AWS SDK's default
// chain finds static ones: the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the profile AWS_PROFILE
// (or "default") of the shared credentials file (AWS_SHARED_CREDENTIALS_FILE
// or ~/.aws/credentials). They are looked up at every authentication, so
// rotated credentials are taken. Instance and container roles (IMDS, ECS)
// would need the AWS SDK and are not looked up: export the role's
// credentials into the environment (README.md).
func awsMechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	if s.Region != "" && os.Getenv("AWS_REGION") == "" {
		// franz-go takes the region from the broker's name (MSK's names
		// carry it) and falls back to AWS_REGION: set it for the fallback.
		os.Setenv("AWS_REGION", s.Region)
	}
	if _, err := awsCredentials(); err != nil {
		return nil, err
	}
	return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
		return awsCredentials()
	}), nil
}

func awsCredentials() (aws.Auth, error) {
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		return aws.Auth{AccessKey: id, SecretKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
	}
	path := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return aws.Auth{}, fmt.Errorf("kafka.sasl.mechanism AWS_MSK_IAM: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		path = filepath.Join(home, ".aws", "credentials")
	}
	profile := os.Getenv("AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	b, err := secretfile.Read(path, "kafka.sasl.mechanism AWS_MSK_IAM", "the AWS credentials", maxSecretBytes)
	if err != nil {
		return aws.Auth{}, fmt.Errorf("no credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and the shared credentials file cannot be used: %w", err)
	}
	v := iniSection(string(b), profile)
	if v["aws_access_key_id"] == "" || v["aws_secret_access_key"] == "" {
		return aws.Auth{}, fmt.Errorf("kafka.sasl.mechanism AWS_MSK_IAM: profile %q of %s has no aws_access_key_id and aws_secret_access_key", profile, path)
	}
	return aws.Auth{AccessKey: v["aws_access_key_id"], SecretKey: v["aws_secret_access_key"], SessionToken: v["aws_session_token"]}, nil
}

// iniSection is the key = value lines of section [name] of an INI text.
func iniSection(text, name string) map[string]string {
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = strings.TrimSpace(line[1:len(line)-1]) == name
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && in {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}
