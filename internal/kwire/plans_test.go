package kwire

import "testing"

// TestEveryAnswerPlans builds the walk of every answer kafka-go can read,
// at every version it speaks: an array's element is planned when the
// array is (no lookup per array met), which would never end on a type
// that held itself.
func TestEveryAnswerPlans(t *testing.T) {
	for key, a := range apis {
		lo, hi, flexible := versions(a.res)
		if flexible != a.resFlexibleMin {
			t.Errorf("API %d: first flexible version %d, cached %d", key, flexible, a.resFlexibleMin)
		}
		for v := lo; v <= hi; v++ {
			if checkerOf(a.res, v, flexible >= 0 && v >= flexible) == nil {
				t.Errorf("API %d v%d: no walk", key, v)
			}
		}
	}
}
