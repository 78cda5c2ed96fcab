module github.com/weftworks/weft

go 1.25.0

require (
	github.com/tetratelabs/wazero v1.12.0
	go.uber.org/goleak v1.3.0
	golang.org/x/image v0.44.0
	golang.org/x/text v0.40.0
)

require (
	github.com/kr/text v0.2.0 // indirect
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/expr-lang/expr v1.17.8
	golang.org/x/sys v0.45.0 // indirect
	gopkg.in/yaml.v3 v3.0.1
)
