package fossilio

import (
	"crypto/sha1"
	"crypto/sha3"
	"encoding/hex"
)

// MinPrefix is the shortest hash prefix OCX resolves (protocol v1, E8).
const MinPrefix = 10

// Short is a hash's first MinPrefix digits, as people quote it; a shorter
// string is itself.
func Short(h string) string {
	if len(h) > MinPrefix {
		return h[:MinPrefix]
	}
	return h
}

// Lengths of the two kinds of artifact names Fossil uses.
const (
	sha1Len = 40
	sha3Len = 64
)

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// IsHash reports whether s is a full artifact name: 40 (SHA1) or 64
// (SHA3-256) lowercase hex digits.
func IsHash(s string) bool {
	return (len(s) == sha1Len || len(s) == sha3Len) && isLowerHex(s)
}

// HashOf returns the name Fossil gives data under its default policy: the
// SHA3-256 of its bytes, in lowercase hex.
func HashOf(data []byte) string {
	sum := sha3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashMatches reports whether name is the hash of data, by the algorithm its
// length implies.
func hashMatches(name string, data []byte) bool {
	switch len(name) {
	case sha1Len:
		sum := sha1.Sum(data)
		return hex.EncodeToString(sum[:]) == name
	case sha3Len:
		sum := sha3.Sum256(data)
		return hex.EncodeToString(sum[:]) == name
	}
	return false
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
