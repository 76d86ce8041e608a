package dashboard_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

// One person, two merchants, two tabs of one Chromium: the person signs in
// once by typing address and password (no merchant id), picks a merchant,
// opens the other in a second tab, and works in both; the header's
// switcher moves a tab to another merchant; a membership removed by the
// other merchant's admin closes that merchant's tab on its next page and
// leaves the other tab working. `make screenshots` keeps the sign-in, the
// picker and the switcher in docs/img.
var anaSeq int

func TestBrowserPersonWithTwoMerchantsInTwoTabs(t *testing.T) {
	shots := bt.ScreenshotDir(t)
	if os.Getenv("PAYREQ_SCREENSHOTS") == "1" {
		shots = filepath.Join("..", "..", "docs", "img")
	}
	a := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.Name = "Acme Books" })
	b := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.Name = "Blue Harbour Travel" })
	c := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.Name = "Cedar Street Café" })
	anaSeq++
	email := "ana.lima@northwind-agency.example" // an agency's finance lead, as the screenshots show her
	if anaSeq > 1 {
		email = "ana.lima" + strconv.Itoa(anaSeq) + "@northwind-agency.example"
	}
	newPerson(t, email)
	join(t, email, a.ID, dashuser.RoleAdmin)
	join(t, email, b.ID, dashuser.RoleMember)
	invite(t, c, email, time.Now()) // and Cedar Street Café has invited her
	inA := newBrowser(t, a.ID, email)
	inB, inC := inA.in(b.ID), inA.in(c.ID)
	base := testenv.Stack(t).Info.APIBase

	tab1 := bt.New(t)
	bt.Do(t, tab1, chromedp.EmulateViewport(1280, 800))
	bt.Navigate(t, tab1, base+"/dashboard/login")
	if n := bt.Eval[int](t, tab1, `document.querySelectorAll("main form input:not([type=hidden])").length`); n != 2 {
		t.Errorf("the sign-in form has %d fields, want 2 (e-mail and password)", n)
	}
	bt.Do(t, tab1, chromedp.SendKeys(chromedp.ID("email"), inA.email), chromedp.SendKeys(chromedp.ID("password"), password))
	bt.Screenshot(t, tab1, filepath.Join(shots, "dashboard-signin.png"))
	navigateBy(t, tab1, `document.querySelector("main form").submit()`)
	if p := bt.Eval[string](t, tab1, `location.pathname`); p != "/dashboard/merchants" {
		t.Fatalf("after sign-in: %s", p)
	}
	names := bt.Eval[string](t, tab1, text("#merchants"))
	if !strings.Contains(names, "Acme Books") || !strings.Contains(names, "Blue Harbour Travel") || strings.Contains(names, "Cedar") {
		t.Fatalf("the picker lists %q", names)
	}
	if got := bt.Eval[string](t, tab1, text("#invitations")); !strings.Contains(got, "Cedar Street Café") {
		t.Fatalf("the picker's invitations: %q", got)
	}
	bt.Screenshot(t, tab1, filepath.Join(shots, "dashboard-picker.png"))
	// Accepted signed in, with no new password: Cedar Street Café opens.
	navigateBy(t, tab1, `document.querySelector("#invitations button").click()`)
	if p := bt.Eval[string](t, tab1, `location.pathname`); p != inC.home() {
		t.Fatalf("after accepting: %s", p)
	}
	bt.Navigate(t, tab1, base+"/dashboard/merchants")

	// Tab 1 picks Acme Books; tab 2 opens Blue Harbour Travel.
	navigateBy(t, tab1, `document.querySelector('a.merchant[data-merchant=`+bt.JS(a.ID)+`]').click()`)
	tab2 := bt.NewTab(t, tab1)
	bt.Navigate(t, tab2, base+inB.at("/dashboard/profile"))
	for range 2 { // back and forth: each tab keeps its merchant
		bt.Navigate(t, tab1, base+inA.at("/dashboard/profile"))
		if id := bt.Eval[string](t, tab1, text("#merchant-id")); id != a.ID {
			t.Fatalf("tab 1 shows merchant %q, want %s", id, a.ID)
		}
		bt.Navigate(t, tab2, base+inB.at("/dashboard/profile"))
		if id := bt.Eval[string](t, tab2, text("#merchant-id")); id != b.ID {
			t.Fatalf("tab 2 shows merchant %q, want %s", id, b.ID)
		}
	}
	// Admin at A, member at B: each tab shows that merchant's role.
	if bt.Eval[bool](t, tab2, `!!document.querySelector("#rotate-key")`) || !bt.Eval[bool](t, tab1, `!!document.querySelector("#rotate-key")`) {
		t.Error("the tabs do not show the person's role at their merchant")
	}
	// A change in tab 1 lands at A, with the person in A's audit log.
	bt.Navigate(t, tab1, base+inA.at("/dashboard/profile"))
	navigateBy(t, tab1, `document.querySelector("#notifyUrl").value = "https://acme.example/hooks"; document.querySelector("#settings").submit()`)
	bt.Navigate(t, tab1, base+inA.at("/dashboard/audit"))
	if got := bt.Eval[string](t, tab1, text("#audit")); !strings.Contains(got, "acme.example") || !strings.Contains(got, inA.email) {
		t.Errorf("A's audit log: %q", got)
	}

	// The switcher: open it in tab 1 and move that tab to B.
	bt.Navigate(t, tab1, base+inA.at("/dashboard/overview"))
	bt.Do(t, tab1, chromedp.Click(chromedp.CSS("#switcher > summary")))
	bt.WaitJS(t, tab1, `document.querySelector("#switcher").open`, pageTimeout)
	bt.Screenshot(t, tab1, filepath.Join(shots, "dashboard-switcher.png"))
	navigateBy(t, tab1, `document.querySelector('#switcher button[value=`+bt.JS(b.ID)+`]').click()`)
	if p := bt.Eval[string](t, tab1, `location.pathname`); p != inB.home() {
		t.Errorf("after switching, tab 1 is at %s", p)
	}
	if got := bt.Eval[string](t, tab1, text("#current-merchant")); !strings.Contains(got, "Blue Harbour Travel") {
		t.Errorf("the header names %q", got)
	}
	bt.Navigate(t, tab2, base+inA.at("/dashboard/payments")) // and tab 2 goes to A
	if p := bt.Eval[string](t, tab2, `location.pathname`); p != inA.at("/dashboard/payments") {
		t.Errorf("tab 2 at A: %s", p)
	}

	// B's admin removes the person from B: tab 1 (at B) loses B on its next
	// page; tab 2 (at A) works on.
	bAdmin := newUser(t, b, dashuser.RoleAdmin)
	bAdmin.mustSignIn()
	if p := bAdmin.remove(inA.email); p.status != http.StatusOK {
		t.Fatalf("remove: %d", p.status)
	}
	bt.Navigate(t, tab1, base+inB.at("/dashboard/overview"))
	if h := bt.Eval[string](t, tab1, `document.querySelector("h1").textContent`); h != "Sorry" {
		t.Errorf("the removed merchant's page in tab 1: %q", h)
	}
	bt.Navigate(t, tab2, base+inA.at("/dashboard/overview"))
	if h := bt.Eval[string](t, tab2, `document.querySelector("h1").textContent`); h != "Overview" {
		t.Errorf("the other merchant's page in tab 2: %q", h)
	}
	// The switcher lists no removed merchant; on a phone the picker fits.
	if bt.Eval[bool](t, tab2, `!!document.querySelector('#switcher button[value=`+bt.JS(b.ID)+`]')`) {
		t.Error("the switcher still offers the removed merchant")
	}
	bt.Do(t, tab2, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	bt.Navigate(t, tab2, base+"/dashboard/merchants")
	if w := bt.Eval[float64](t, tab2, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the picker is %v px wide on a 390 px phone", w)
	}
}
