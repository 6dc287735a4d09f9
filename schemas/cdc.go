package schemas

import (
	"embed"
	"fmt"
)

// The change view's schemas (cdc/*.avsc): the key and value of
// <prefix>.cdc.<db> and the value of <prefix>.cdc-heartbeats. They are
// registered under their topic's subjects (<topic>-key, <topic>-value),
// not by record name, and are not among Schemas.
const (
	CDCKeyFile       = "cdc/key.avsc"
	CDCEnvelopeFile  = "cdc/envelope.avsc"
	CDCHeartbeatFile = "cdc/heartbeat.avsc"
)

//go:embed cdc/*.avsc
var cdcFiles embed.FS

// CDCSchema returns the text of one of the change view's schemas
// (CDCKeyFile, ...).
func CDCSchema(file string) (string, error) {
	b, err := cdcFiles.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("change view schema %s: %w", file, err)
	}
	return string(b), nil
}
