module github.com/weftworks/weft/sdk

go 1.24

require github.com/weftworks/weft/abi v0.0.0-00010101000000-000000000000

replace github.com/weftworks/weft/abi => ../abi
