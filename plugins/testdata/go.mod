module github.com/weftworks/weft/plugins/testdata

go 1.24

require github.com/weftworks/weft/sdk v0.0.0-00010101000000-000000000000

require github.com/weftworks/weft/abi v0.0.0-00010101000000-000000000000 // indirect

replace (
	github.com/weftworks/weft/abi => ../../abi
	github.com/weftworks/weft/sdk => ../../sdk
)
