module github.com/weftworks/weft/examples

go 1.26.0

replace (
	github.com/weftworks/weft => ../
	github.com/weftworks/weft/abi => ../abi
	github.com/weftworks/weft/sdk => ../sdk
)

require (
	github.com/tetratelabs/wazero v1.12.0
	github.com/weftworks/weft v0.0.0-00010101000000-000000000000
	github.com/weftworks/weft/abi v0.0.0-00010101000000-000000000000
	github.com/weftworks/weft/sdk v0.0.0-00010101000000-000000000000
	golang.org/x/image v0.44.0
	golang.org/x/text v0.42.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/expr-lang/expr v1.17.8 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
