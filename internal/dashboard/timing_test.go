package dashboard_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// Sign-in must not tell which addresses are people of the dashboard: an
// attacker who times a wrong password for an address learns whether it
// signs in somewhere unless both cases cost the same work.

// timingSamples is the samples per case; maxTimingZ the |z| of the
// Mann–Whitney U test above which the two distributions differ. 3.29 is
// the two-sided 0.1 % point of the normal distribution: with equal
// distributions the test fails once in a thousand runs, while the gap the
// attack round found (one DynamoDB write, about 1 ms of 40–60 ms) gave
// z ≈ 5.4–6.6 at 200 samples per case.
const (
	timingSamples = 200
	maxTimingZ    = 3.29
)

// mannWhitneyZ is the Mann–Whitney U statistic of a against b as a z
// score: the normal approximation with the tie correction (ranks of equal
// values averaged). Positive when a tends to be larger.
func mannWhitneyZ(a, b []float64) float64 {
	type v struct {
		x     float64
		fromA bool
	}
	all := make([]v, 0, len(a)+len(b))
	for _, x := range a {
		all = append(all, v{x, true})
	}
	for _, x := range b {
		all = append(all, v{x, false})
	}
	slices.SortFunc(all, func(p, q v) int {
		switch {
		case p.x < q.x:
			return -1
		case p.x > q.x:
			return 1
		}
		return 0
	})
	n1, n2, n := float64(len(a)), float64(len(b)), float64(len(all))
	var rankA, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].x == all[i].x {
			j++
		}
		rank := float64(i+j+1) / 2 // ranks i+1..j averaged
		for k := i; k < j; k++ {
			if all[k].fromA {
				rankA += rank
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	u := rankA - n1*(n1+1)/2
	sd := math.Sqrt(n1 * n2 / 12 * ((n + 1) - ties/(n*(n-1))))
	return (u - n1*n2/2) / sd
}

func TestMannWhitneyZ(t *testing.T) {
	same := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	if z := mannWhitneyZ(same, same); z != 0 {
		t.Errorf("equal samples: z = %v", z)
	}
	// Textbook case: a = 1..10, b = 11..20 (no overlap): U = 0, z = -3.78.
	var a, b []float64
	for i := 1; i <= 10; i++ {
		a, b = append(a, float64(i)), append(b, float64(i+10))
	}
	if z := mannWhitneyZ(a, b); math.Abs(z+3.7796) > 0.001 {
		t.Errorf("disjoint samples: z = %v, want -3.7796", z)
	}
	if z := mannWhitneyZ(b, a); math.Abs(z-3.7796) > 0.001 {
		t.Errorf("reversed: z = %v", z)
	}
}

// A wrong password for a user and for an address that is nobody's user
// take the same time: 200 sign-ins of each, interleaved in random order
// (a load spike hits both cases alike), against the real handler on the
// local stack's DynamoDB; each sign-in is a first try of its address, as
// an enumeration probe is (no lock in force). Fails when the Mann–Whitney
// |z| exceeds maxTimingZ. A busy machine adds noise to both cases, not a
// difference between them.
func TestSignInTimeDoesNotTellWhichUsersExist(t *testing.T) {
	c := newClock()
	base := clockedDashboard(t, c)
	m := testenv.NewMerchant(t)
	st := testenv.Stack(t).Store
	hash, err := sftpauth.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	warm := 20
	users := make([]string, timingSamples+warm)
	for i := range users {
		users[i] = fmt.Sprintf("timed%d.%s@shop.example", i, strings.ToLower(m.ID))
		now := time.Now()
		testenv.Seeded(t, "dashboard identity", st.CreateIdentity(context.Background(), &dashuser.Identity{Email: users[i],
			PasswordHash: hash, CreatedAt: now, UpdatedAt: now}))
		testenv.Seeded(t, "dashboard membership", st.SaveMemberships(context.Background(), nil, &dashuser.Membership{Email: users[i],
			MerchantID: m.ID, Role: dashuser.RoleMember, State: dashuser.StateActive, CreatedAt: now, UpdatedAt: now}))
	}
	b := newBrowser(t, m.ID, "")
	b.base = base
	attempt := func(email string) float64 {
		form := url.Values{"csrf": {csrfOf(t, b.get("/dashboard/login"))}, "email": {email}, "password": {"a wrong password"}}
		start := time.Now()
		p := b.post("/dashboard/login", form)
		d := time.Since(start)
		if p.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", email, p.status)
		}
		return float64(d.Microseconds())
	}
	var known, unknown []float64
	for i := range users {
		ghost := fmt.Sprintf("ghost%d.%s@shop.example", i, strings.ToLower(m.ID))
		first, second := users[i], ghost
		swap := rand.IntN(2) == 0
		if swap {
			first, second = second, first
		}
		x, y := attempt(first), attempt(second)
		if swap {
			x, y = y, x
		}
		if i < warm {
			continue
		}
		known, unknown = append(known, x), append(unknown, y)
	}
	z := mannWhitneyZ(known, unknown)
	med := func(s []float64) float64 { s = slices.Clone(s); slices.Sort(s); return s[len(s)/2] }
	t.Logf("wrong password, %d each: user median %.2f ms, nobody's median %.2f ms, Mann–Whitney z = %.2f (fails above %.2f)",
		timingSamples, med(known)/1000, med(unknown)/1000, z, maxTimingZ)
	if f := os.Getenv("PAYREQ_TIMING_OUT"); f != "" {
		line := fmt.Sprintf("z=%.2f user_ms=%.2f nobody_ms=%.2f\n", z, med(known)/1000, med(unknown)/1000)
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = fh.WriteString(line)
			fh.Close()
		}
	}
	if math.Abs(z) > maxTimingZ {
		t.Errorf("sign-in time tells users from nobody's addresses: |z| = %.2f > %.2f", math.Abs(z), maxTimingZ)
	}
}

// callLog records the store calls of the dashboard, by name.
type callLog struct {
	dashboard.Store
	mu    sync.Mutex
	calls []string
}

func (s *callLog) note(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *callLog) Identity(ctx context.Context, email string) (*dashuser.Identity, []*dashuser.Membership, error) {
	s.note("Identity")
	return s.Store.Identity(ctx, email)
}

func (s *callLog) UpdateIdentity(ctx context.Context, id *dashuser.Identity) error {
	s.note("UpdateIdentity")
	return s.Store.UpdateIdentity(ctx, id)
}

func (s *callLog) LoginAttempts(ctx context.Context, key string) (lockout.Counter, error) {
	s.note("LoginAttempts")
	return s.Store.LoginAttempts(ctx, key)
}

func (s *callLog) PutLoginAttempts(ctx context.Context, c *lockout.Counter, expires time.Time) error {
	s.note("PutLoginAttempts")
	return s.Store.PutLoginAttempts(ctx, c, expires)
}

// A wrong password for a user and for nobody's address make the same
// store calls and one Argon2id check each, first try and while locked
// alike; nobody's address is counted and locked like a user.
func TestUnknownAndExistingUsersCostTheSameWork(t *testing.T) {
	c := newClock()
	rec := &callLog{}
	var checks []string
	var mu sync.Mutex
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) {
		rec.Store = d.Store
		d.Store = rec
		check := d.CheckPassword
		d.CheckPassword = func(hash, pw string) bool {
			mu.Lock()
			checks = append(checks, "argon2id")
			mu.Unlock()
			return check(hash, pw)
		}
	})
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	ghost := newBrowser(t, m.ID, "nobody."+strings.ToLower(m.ID)+"@shop.example")
	u.base, ghost.base = base, base
	work := func(b *user) string {
		b.get("/dashboard/login")
		rec.mu.Lock()
		rec.calls = nil
		rec.mu.Unlock()
		mu.Lock()
		checks = nil
		mu.Unlock()
		if p := b.signIn("a wrong password"); p.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d", b.email, p.status)
		}
		return strings.Join(rec.calls, ",") + " + " + strconv.Itoa(len(checks)) + " check"
	}
	for i := 1; i <= lockout.MaxFailures+1; i++ { // the last one while locked
		mine, theirs := work(u), work(ghost)
		if mine != theirs {
			t.Errorf("attempt %d: a user's wrong password makes %q, nobody's address %q", i, mine, theirs)
		}
		if i == 1 && mine != "Identity,LoginAttempts,PutLoginAttempts + 1 check" {
			t.Errorf("attempt 1: %q", mine)
		}
		if i == lockout.MaxFailures+1 && mine != "Identity,LoginAttempts + 1 check" {
			t.Errorf("while locked: %q", mine)
		}
	}
	if got := attempts(t, ghost); got.Failures != lockout.MaxFailures || !got.Locked(c.Now()) {
		t.Errorf("nobody's address: %d failures, locked until %v; want it counted and locked like a user", got.Failures, got.LockedUntil)
	}
}
