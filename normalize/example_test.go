package normalize_test

import (
	"errors"
	"fmt"

	"github.com/sievecrawl/sieve/normalize"
)

func ExampleURL() {
	for _, raw := range []string{
		"HTTP://User@Docs.Example.COM:80/a/./b/../%7Euser/page.html?utm_source=x&b=2&a=1#section",
		"https://bücher.example./straße?q=a b",
		"https://example.com/a%2Fb;jsessionid=0A1B?PHPSESSID=9",
		"mailto:someone@example.com",
	} {
		u, err := normalize.URL(raw)
		fmt.Printf("%q %v\n", u, err)
	}
	// Output:
	// "http://docs.example.com/a/~user/page.html?a=1&b=2" <nil>
	// "https://xn--bcher-kva.example/stra%C3%9Fe?q=a%20b" <nil>
	// "https://example.com/a%2Fb" <nil>
	// "" normalize: scheme is not http or https: "mailto:someone@example.com"
}

func ExampleNormalizer_Resolve() {
	n, err := normalize.New(normalize.Options{})
	if err != nil {
		panic(err)
	}
	page := "https://docs.python.org/3/library/os.html"
	for _, href := range []string{
		"#os.getcwd",
		"os.path.html#os.path.join",
		"../reference/datamodel.html",
		"//www.python.org/?utm_campaign=docs",
		"javascript:void(0)",
	} {
		u, err := n.Resolve(page, href)
		var e *normalize.Error
		if errors.As(err, &e) {
			fmt.Printf("%-28s rejected: %s\n", href, e.Reason)
			continue
		}
		fmt.Printf("%-28s %s\n", href, u)
	}
	// Output:
	// #os.getcwd                   https://docs.python.org/3/library/os.html
	// os.path.html#os.path.join    https://docs.python.org/3/library/os.path.html
	// ../reference/datamodel.html  https://docs.python.org/3/reference/datamodel.html
	// //www.python.org/?utm_campaign=docs https://www.python.org/
	// javascript:void(0)           rejected: scheme
}

func ExampleNormalizer_Version() {
	def, _ := normalize.New(normalize.Options{})
	custom, _ := normalize.New(normalize.Options{MaxLength: 4096})
	fmt.Println(def.Version(), custom.Version())
	// Output: 1 1+61920da6
}

func ExampleScope_In() {
	s, err := normalize.NewScope(normalize.ScopeOptions{
		Seeds: []string{"https://www.example.co.uk/"},
		Mode:  normalize.ScopeDomain,
		Deny:  []string{"shop.example.co.uk"},
	})
	if err != nil {
		panic(err)
	}
	for _, u := range []string{
		"https://docs.example.co.uk/a",
		"https://shop.example.co.uk/cart",
		"https://other.co.uk/",
	} {
		fmt.Println(u, s.In(u))
	}
	// Output:
	// https://docs.example.co.uk/a true
	// https://shop.example.co.uk/cart false
	// https://other.co.uk/ false
}
