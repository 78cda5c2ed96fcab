module github.com/weftworks/weft/abi

go 1.24
