package router

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/ledger"
)

// A money param writes a minor-unit amount in major units, with the currency's
// ISO 4217 exponent: 2 for USD, 0 for JPY, 3 for KWD.
func TestMoneyParam(t *testing.T) {
	t.Parallel()
	doc := func(amount any, currency string) any {
		return map[string]any{"amount_total": amount, "currency": currency}
	}
	money := ledger.Money{Amount: "/amount_total", Currency: "/currency"}
	number := ledger.Money{Amount: "/amount_total", Currency: "/currency", AsNumber: true}
	tests := []struct {
		name  string
		m     ledger.Money
		doc   any
		want  any
		wantN any
	}{
		{"USDCents", money, doc(json.Number("4200"), "usd"), "42.00", json.Number("42.00")},
		{"USDUnderOneDollar", money, doc(json.Number("5"), "USD"), "0.05", json.Number("0.05")},
		{"JPYHasNoMinorUnit", money, doc(json.Number("4200"), "jpy"), "4200", json.Number("4200")},
		{"KWDHasThreeDigits", money, doc(json.Number("4200"), "kwd"), "4.200", json.Number("4.200")},
		{"KWDFils", money, doc(json.Number("7"), "KWD"), "0.007", json.Number("0.007")},
		{"NegativeRefund", money, doc(json.Number("-150"), "eur"), "-1.50", json.Number("-1.50")},
		{"BigAmountStaysExact", money, doc(json.Number("123456789012345678"), "usd"), "1234567890123456.78", json.Number("1234567890123456.78")},
		{"FixedCurrency", ledger.Money{Amount: "/amount_total", Currency: "JPY"}, doc(json.Number("990"), "usd"), "990", nil},
		{"UnknownCurrencyIsNull", money, doc(json.Number("4200"), "abc"), nil, nil},
		{"FractionIsNull", money, doc(json.Number("42.5"), "usd"), nil, nil},
		{"MissingAmountIsNull", money, doc(nil, "usd"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Render(tt.doc); !cmp.Equal(got, tt.want) {
				t.Errorf("as string: %#v, want %#v", got, tt.want)
			}
			if tt.m != money {
				return
			}
			if got := number.Render(tt.doc); !cmp.Equal(got, tt.wantN) {
				t.Errorf("as number: %#v, want %#v", got, tt.wantN)
			}
		})
	}
	// Rendered into an action's params, a number stays a JSON number, digit for digit.
	got, err := renderParams(doc(json.Number("4200"), "kwd"), []ledger.Param{{Name: "value", Money: &number}, {Name: "amount", Money: &money}})
	if err != nil || string(got) != `{"amount":"4.200","value":4.200}` {
		t.Errorf("renderParams = %s, %v", got, err)
	}
}
