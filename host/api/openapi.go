package api

import _ "embed"

// openAPIDocument is the OpenAPI 3.1 description of the routes, served at
// /v1/openapi.json. TestOpenAPIMatchesRoutes keeps it in step with the
// registered routes; each operation's x-weft-role names the least role
// that may use it.
//
//go:embed openapi.json
var openAPIDocument []byte
