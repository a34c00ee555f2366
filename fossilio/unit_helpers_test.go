package fossilio_test

import (
	"crypto/md5"
	"encoding/hex"
)

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}
