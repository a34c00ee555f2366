package strictjson

// MaxSafeInt is the largest whole number every JSON reader reads exactly
// (2^53-1); a start time in clock ticks stays far below it.
const MaxSafeInt = 1<<53 - 1

// addCapped is a+b, capped at MaxSafeInt: a count that stays a JSON number
// every reader reads exactly.
func AddCapped(a, b uint64) uint64 {
	if a > MaxSafeInt-min(b, MaxSafeInt) {
		return MaxSafeInt
	}
	return a + b
}
