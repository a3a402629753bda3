//! Natural ordering of node names, so that `acme-fe2` sorts before `acme-fe10`.

use std::cmp::Ordering;

/// Compares two names treating each run of ASCII digits as a number.
///
/// Numbers compare by value; equal values with different zero padding fall back to comparing the
/// text so that the order is total and consistent with equality.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a_rest, mut b_rest) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a_rest.first(), b_rest.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let a_len = a_rest.iter().take_while(|c| c.is_ascii_digit()).count();
                let b_len = b_rest.iter().take_while(|c| c.is_ascii_digit()).count();
                let ordering = compare_digit_runs(&a_rest[..a_len], &b_rest[..b_len]);
                if ordering != Ordering::Equal {
                    return ordering;
                }
                a_rest = &a_rest[a_len..];
                b_rest = &b_rest[b_len..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a_rest = &a_rest[1..];
                b_rest = &b_rest[1..];
            }
        }
    }
}

fn compare_digit_runs(a: &[u8], b: &[u8]) -> Ordering {
    let a = trim_leading_zeros(a);
    let b = trim_leading_zeros(b);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn trim_leading_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[zeros..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbers_sort_by_value() {
        let mut names = vec![
            "acme-fe10",
            "acme-fe2",
            "acme-fe1",
            "acme-be",
            "acme-fe11",
            "acme-fe3",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "acme-be",
                "acme-fe1",
                "acme-fe2",
                "acme-fe3",
                "acme-fe10",
                "acme-fe11"
            ]
        );
    }

    #[test]
    fn zero_padding_is_a_tie_breaker_not_equality() {
        assert_eq!(natural_cmp("fe01", "fe1"), "fe01".cmp("fe1"));
        assert_ne!(natural_cmp("fe01", "fe1"), Ordering::Equal);
        assert_eq!(natural_cmp("fe01", "fe2"), Ordering::Less);
    }

    #[test]
    fn huge_numbers_do_not_overflow() {
        assert_eq!(
            natural_cmp("fe99999999999999999999999", "fe100000000000000000000000"),
            Ordering::Less
        );
    }

    proptest! {
        #[test]
        fn is_a_total_order(a in "[a-c0-9]{0,6}", b in "[a-c0-9]{0,6}", c in "[a-c0-9]{0,6}") {
            prop_assert_eq!(natural_cmp(&a, &b), natural_cmp(&b, &a).reverse());
            prop_assert_eq!(natural_cmp(&a, &b) == Ordering::Equal, a == b);
            if natural_cmp(&a, &b) != Ordering::Greater && natural_cmp(&b, &c) != Ordering::Greater {
                prop_assert_ne!(natural_cmp(&a, &c), Ordering::Greater);
            }
        }
    }
}
