package ledger

// SetBeforeClaim makes every claim of l call f after it chose its block and before it
// creates it.
func SetBeforeClaim(l *Ledger, f func(pool string)) { l.beforeClaim = f }
