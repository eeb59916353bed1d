//go:build tools

// Package tools pins golangci-lint, built from source like every other tool here.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
