package router

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/money"
	"github.com/oncehook/oncehook/internal/settings"
)

// A money param writes a minor-unit amount in major units, with the currency's
// ISO 4217 exponent: 2 for USD, 0 for JPY, 3 for KWD.
func TestMoneyParam(t *testing.T) {
	t.Parallel()
	doc := func(amount any, currency string) any {
		return map[string]any{"amount_total": amount, "currency": currency}
	}
	str := money.Money{Amount: "/amount_total", Currency: "/currency"}
	number := money.Money{Amount: "/amount_total", Currency: "/currency", AsNumber: true}
	tests := []struct {
		name  string
		m     money.Money
		doc   any
		want  any
		wantN any
		why   string // the problem Render names when it writes nil
	}{
		{"USDCents", str, doc(json.Number("4200"), "usd"), "42.00", json.Number("42.00"), ""},
		{"USDUnderOneDollar", str, doc(json.Number("5"), "USD"), "0.05", json.Number("0.05"), ""},
		{"JPYHasNoMinorUnit", str, doc(json.Number("4200"), "jpy"), "4200", json.Number("4200"), ""},
		{"KWDHasThreeDigits", str, doc(json.Number("4200"), "kwd"), "4.200", json.Number("4.200"), ""},
		{"KWDFils", str, doc(json.Number("7"), "KWD"), "0.007", json.Number("0.007"), ""},
		{"NegativeRefund", str, doc(json.Number("-150"), "eur"), "-1.50", json.Number("-1.50"), ""},
		{"BigAmountStaysExact", str, doc(json.Number("123456789012345678"), "usd"), "1234567890123456.78", json.Number("1234567890123456.78"), ""},
		{"FixedCurrency", money.Money{Amount: "/amount_total", Currency: "JPY"}, doc(json.Number("990"), "usd"), "990", nil, ""},
		{"UnknownCurrencyIsRefused", str, doc(json.Number("4200"), "abc"), nil, nil, `the currency "abc" is not an ISO 4217 code`},
		{"MissingCurrencyIsRefused", str, map[string]any{"amount_total": json.Number("4200")}, nil, nil, "the event has no currency at /currency"},
		{"FractionIsRefused", str, doc(json.Number("42.5"), "usd"), nil, nil, `the amount "42.5" at /amount_total is not a whole number of minor units`},
		{"MissingAmountIsRefused", str, doc(nil, "usd"), nil, nil, "the event has no amount at /amount_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := tt.m.Render(tt.doc)
			if !cmp.Equal(got, tt.want) || why != tt.why {
				t.Errorf("as string: %#v, %q; want %#v, %q", got, why, tt.want, tt.why)
			}
			if tt.m != str {
				return
			}
			if got, _ := number.Render(tt.doc); !cmp.Equal(got, tt.wantN) {
				t.Errorf("as number: %#v, want %#v", got, tt.wantN)
			}
		})
	}
	// Rendered into an action's params, a number stays a JSON number, digit for digit.
	got, unfillable, err := renderParams(doc(json.Number("4200"), "kwd"), []settings.Param{{Name: "value", Money: &number}, {Name: "amount", Money: &str}})
	if err != nil || unfillable != "" || string(got) != `{"amount":"4.200","value":4.200}` {
		t.Errorf("renderParams = %s, %q, %v", got, unfillable, err)
	}
	// A param the event cannot fill is named, with where it sits among the params.
	nested := []settings.Param{{Name: "deal", IsObject: true, Object: []settings.Param{{Name: "amount", Money: &str}}}}
	if _, unfillable, _ := renderParams(doc(json.Number("4200"), "XTS1"), nested); unfillable != `deal.amount: the currency "XTS1" is not an ISO 4217 code` {
		t.Errorf("renderParams names the unfillable param as %q", unfillable)
	}
}
