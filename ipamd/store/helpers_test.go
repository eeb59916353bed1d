package store_test

import (
	"errors"

	"github.com/nicpool/nicpool/ipamd/allocator"
)

func errorsIsExhausted(err error) bool { return errors.Is(err, allocator.ErrExhausted) }
func errorsIs(err, target error) bool  { return errors.Is(err, target) }
