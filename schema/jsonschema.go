package schema

import _ "embed"

// JSONSchema is the record contract as a JSON Schema document, served at GET /v1/schema.
//
//go:embed attempt.schema.json
var JSONSchema []byte
