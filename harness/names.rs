//! One name table per enum: `named!` gives an enum its `ALL` list, `name()`, `from_name()`
//! and the serde form (the name as a string) from a single list of `Variant => "name"`.

/// Defines `ALL`, `name()`, `from_name()`, `Serialize` and `Deserialize` for a field-less enum
/// from one table; `match` keeps the table complete.
#[macro_export]
macro_rules! named {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in listing order.
            pub const ALL: [$ty; [$(stringify!($variant)),+].len()] = [$($ty::$variant),+];

            /// The name used in specs, manifests, JSON and the register.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// The variant called `name`, if any.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// Every name, in listing order.
            pub const fn names() -> [&'static str; [$(stringify!($variant)),+].len()] {
                [$($name),+]
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                $ty::from_name(&text).ok_or_else(|| serde::de::Error::unknown_variant(&text, &[$($name),+]))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        DeepBlue,
    }

    crate::named!(Colour { Red => "red", DeepBlue => "deep-blue" });

    #[test]
    fn one_table_gives_names_lookup_and_serde() {
        assert_eq!(Colour::ALL, [Colour::Red, Colour::DeepBlue]);
        assert_eq!(Colour::DeepBlue.name(), "deep-blue");
        assert_eq!(Colour::names(), ["red", "deep-blue"]);
        assert_eq!(Colour::from_name("red"), Some(Colour::Red));
        assert_eq!(Colour::from_name("Red"), None);
        assert_eq!(serde_json::to_string(&Colour::DeepBlue).unwrap(), "\"deep-blue\"");
        assert_eq!(serde_json::from_str::<Colour>("\"red\"").unwrap(), Colour::Red);
        let err = serde_json::from_str::<Colour>("\"green\"").unwrap_err().to_string();
        assert!(err.contains("unknown variant `green`, expected `red` or `deep-blue`"), "{err}");
    }
}
