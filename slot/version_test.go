package slot

import (
	"errors"
	"strings"
	"testing"
)

func TestServerFactsByVersion(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		num                             int
		supported, rowFilters, failover bool
		major, minor                    int
	}{
		{"9.6.24", 90624, false, false, false, 9, 624},
		{"13.16", 130016, false, false, false, 13, 16},
		{"14.0", 140000, true, false, false, 14, 0},
		{"14.13", 140013, true, false, false, 14, 13},
		{"15.0", 150000, true, true, false, 15, 0},
		{"16.4", 160004, true, true, false, 16, 4},
		{"17.0", 170000, true, true, true, 17, 0},
		{"17.2", 170002, true, true, true, 17, 2},
		{"18.0", 180000, true, true, true, 18, 0},
	} {
		s := Server{Num: tc.num}
		if got := s.Supported(); got != tc.supported {
			t.Errorf("%s: Supported() = %v, want %v", tc.name, got, tc.supported)
		}
		if got := s.RowFilters(); got != tc.rowFilters {
			t.Errorf("%s: RowFilters() = %v, want %v", tc.name, got, tc.rowFilters)
		}
		if got := s.FailoverSlots(); got != tc.failover {
			t.Errorf("%s: FailoverSlots() = %v, want %v", tc.name, got, tc.failover)
		}
		if s.Major() != tc.major || s.Minor() != tc.minor {
			t.Errorf("%s: Major(), Minor() = %d, %d, want %d, %d", tc.name, s.Major(), s.Minor(), tc.major, tc.minor)
		}
		if why := s.Unsupported(); (why == "") != tc.supported {
			t.Errorf("%s: Unsupported() = %q, want a reason only when unsupported", tc.name, why)
		}
	}
}

func TestUnsupportedServerNamesItsRelease(t *testing.T) {
	for _, tc := range []struct {
		num  int
		want string
	}{
		{130016, "PostgreSQL 13 is not supported"},
		{90624, "PostgreSQL 9.6 is not supported"},
		{100023, "PostgreSQL 10 is not supported"},
	} {
		why := Server{Num: tc.num}.Unsupported()
		if !strings.HasPrefix(why, tc.want) || !strings.Contains(why, "PostgreSQL 14 or newer") {
			t.Errorf("%d: %q, want it to start %q and ask for PostgreSQL 14 or newer", tc.num, why, tc.want)
		}
	}
}

func TestWantFailoverByVersionAndSetting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		num      int
		failover Failover
		want     bool
		refused  bool
	}{
		{"auto on 16", 160004, FailoverAuto, false, false},
		{"auto on 17", 170000, FailoverAuto, true, false},
		{"unset on 18", 180000, "", true, false},
		{"on on 17", 170002, FailoverOn, true, false},
		{"on on 16 is refused", 160004, FailoverOn, false, true},
		{"off on 17", 170000, FailoverOff, false, false},
	} {
		got, err := wantFailover(Server{Num: tc.num}, Target{Failover: tc.failover})
		if got != tc.want || (err != nil) != tc.refused {
			t.Errorf("%s: %v, %v; want %v, refused %v", tc.name, got, err, tc.want, tc.refused)
		}
		if tc.refused && (!errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "this is 16.4")) {
			t.Errorf("%s: %v, want ErrNotReady naming the server's version 16.4", tc.name, err)
		}
	}
}
