package schemas

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// SRRegistry is a Registry over a Confluent-compatible schema registry,
// through franz-go's sr client.
type SRRegistry struct {
	cl *sr.Client
}

var (
	_ Registry            = (*SRRegistry)(nil)
	_ CompatibilitySetter = (*SRRegistry)(nil)
)

// NewSRRegistry returns a Registry over cl.
func NewSRRegistry(cl *sr.Client) *SRRegistry { return &SRRegistry{cl: cl} }

// Register registers an Avro schema under subject, or finds it there, and
// returns its ID.
func (r *SRRegistry) Register(ctx context.Context, subject, schema string) (int, error) {
	id, err := r.cl.RegisterSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("register under subject %s: %w", subject, err)
	}
	return id, nil
}

// SchemaByID returns the text of the schema with the given ID.
func (r *SRRegistry) SchemaByID(ctx context.Context, id int) (string, error) {
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			// 40403 SCHEMA_NOT_FOUND on Confluent and Karapace.
			return "", fmt.Errorf("%w %d: %w", ErrUnknownSchemaID, id, err)
		}
		return "", fmt.Errorf("get schema ID %d: %w", id, err)
	}
	if s.Type != sr.TypeAvro {
		return "", fmt.Errorf("schema ID %d is a %s schema, not Avro", id, s.Type)
	}
	return s.Schema, nil
}

// SetCompatibility sets subject's compatibility level. It returns an error
// wrapping errors.ErrUnsupported when the registry has no config endpoint.
func (r *SRRegistry) SetCompatibility(ctx context.Context, subject, level string) error {
	var l sr.CompatibilityLevel
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("compatibility level %q: %w", level, err)
	}
	res := r.cl.SetCompatibility(ctx, sr.SetCompatibility{Level: l}, subject)
	if len(res) != 1 {
		return fmt.Errorf("set compatibility of subject %s: %d results", subject, len(res))
	}
	err := res[0].Err
	if err == nil {
		return nil
	}
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusNotFound && re.ErrorCode == sr.ErrSubjectNotFound.Code:
			// The subject does not exist yet: a real error, not a
			// missing endpoint.
		case re.StatusCode == http.StatusNotFound, re.StatusCode == http.StatusMethodNotAllowed, re.StatusCode == http.StatusNotImplemented:
			return fmt.Errorf("set compatibility of subject %s: %w: %w", subject, errors.ErrUnsupported, err)
		}
	}
	return fmt.Errorf("set compatibility of subject %s to %s: %w", subject, level, err)
}

// DialSerde makes the Serde of the Confluent-compatible schema registry at
// url, registering hivedr's schemas there (NewSerde); opts (TLS, auth) are
// added to the registry client's.
func DialSerde(ctx context.Context, url string, opts ...sr.ClientOpt) (*Serde, error) {
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", url, err)
	}
	s, err := NewSerde(ctx, NewSRRegistry(cl))
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", url, err)
	}
	return s, nil
}

// DialDecoder makes a read-only Decoder over the Confluent-compatible
// schema registry at url: it fetches writer schemas by ID and registers
// nothing. Nothing is asked of the registry until the first Decode. opts
// (TLS, auth) are added to the registry client's.
func DialDecoder(url string, opts ...sr.ClientOpt) (*Decoder, error) {
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", url, err)
	}
	return NewDecoder(NewSRRegistry(cl)), nil
}
