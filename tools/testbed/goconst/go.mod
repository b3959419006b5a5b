// A separate module so that the project's `go build ./...` and linters skip this helper.
module cluster-init.testbed/goconst

go 1.26.0
