// Package money renders an amount in a currency's minor unit as the major-unit
// decimal a destination expects: the money params of the config's action rules.
package money

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/jsonpointer"
)

// Money is a param that turns an amount in a currency's minor unit (Stripe's
// amount_total: cents, or yen) into the major-unit decimal a CRM expects
// ({money: /amount, currency: /currency}).
type Money struct {
	Amount   string // pointer to the minor-unit integer
	Currency string // pointer to the ISO 4217 code, or the code itself
	AsNumber bool   // a JSON number (42.00) rather than a string ("42.00")
}

// Money's output forms.
const (
	AsString = "string"
	AsNumber = "number"
)

// Render is m's value in doc: the major-unit decimal with the currency's ISO 4217
// exponent of digits after the point. When the event cannot give one (the currency
// is missing or not an ISO 4217 code with an exponent, the amount is not a whole
// number of minor units) it returns nil and why, in words a person can act on.
func (m Money) Render(doc any) (value any, problem string) {
	code := m.Currency
	if strings.HasPrefix(code, "/") {
		var found bool
		if code, found = jsonpointer.String(doc, m.Currency); !found {
			return nil, fmt.Sprintf("the event has no currency at %s", m.Currency)
		}
	}
	exp, ok := CurrencyExponent(code)
	if !ok {
		return nil, fmt.Sprintf("the currency %.40q is not an ISO 4217 code", code)
	}
	minor, ok := jsonpointer.String(doc, m.Amount)
	if !ok {
		return nil, fmt.Sprintf("the event has no amount at %s", m.Amount)
	}
	major, ok := MajorUnits(minor, exp)
	switch {
	case !ok:
		return nil, fmt.Sprintf("the amount %.40q at %s is not a whole number of minor units", minor, m.Amount)
	case m.AsNumber:
		return json.Number(major), ""
	}
	return major, ""
}

// MajorUnits writes the integer minor (in minor units) as a decimal with exp
// digits after the point: "4200" with 2 is "42.00", "-5" with 3 is "-0.005".
// ok is false when minor is not an integer.
func MajorUnits(minor string, exp int) (string, bool) {
	sign, digits := "", minor
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	if exp == 0 {
		return sign + digits, true
	}
	if len(digits) <= exp {
		digits = strings.Repeat("0", exp-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-exp] + "." + digits[len(digits)-exp:], true
}

// CurrencyExponent is the ISO 4217 minor unit of the currency code (upper or
// lower case, as Stripe writes it): how many digits follow the point. ok is false
// for a code that is not a current ISO 4217 currency with a minor unit.
func CurrencyExponent(code string) (int, bool) {
	code = strings.ToUpper(code)
	if e, ok := isoExponents[code]; ok {
		return e, true
	}
	if len(code) == 3 && strings.Contains(isoTwoDigits, code) {
		return 2, true
	}
	return 0, false
}

// isoExponents are the ISO 4217 currencies whose minor unit is not 2 (list one,
// current currencies; the funds and precious metals without one are left out).
var isoExponents = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// isoTwoDigits are the other current ISO 4217 codes, whose minor unit is 2, and a
// few withdrawn lately that payment providers still report.
const isoTwoDigits = "" +
	"AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD " +
	"CAD CDF CHE CHF CHW CNY COP COU CRC CUC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL " +
	"GHS GIP GMD GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR " +
	"LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB " +
	"PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP " +
	"SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG ZWL"
