module github.com/weftworks/weft/sdk

go 1.24
