// Package units prints quantities for people: sizes in the largest binary
// unit they reach, as status and dlq list show them.
package units

import "fmt"

// Bytes is n bytes in the largest binary unit it reaches, with one
// decimal: 512 bytes, 1.5 KiB, 3.0 GiB.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
