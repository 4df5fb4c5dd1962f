//! The macros the family files are written in: `metric!` declares one
//! family's const, `family!` a file's entries and the list of them that
//! [`super::METRICS`] is made of.

/// One family: its const, named for the code that reads it. `servers` names
/// the servers that give it when not every supported one does; `lean` what
/// it writes for lean streams when not every sample (`Lean::Always`).
macro_rules! metric {
    ($id:ident, $name:literal, $kind:ident $({ $($field:tt)* })?, $labels:expr, $help:literal, $source:expr $(, servers: $servers:ident)? $(, lean: $lean:expr)?) => {
        #[doc = $help]
        // The help is Prometheus HELP text, not Markdown: `[probe] target_ttl` names a section.
        #[allow(rustdoc::broken_intra_doc_links)]
        pub const $id: MetricDef = MetricDef {
            name: $name,
            kind: MetricType::$kind $({ $($field)* })?,
            help: $help,
            labels: $labels,
            source: $source,
            servers: metric!(@servers $($servers)?),
            lean: metric!(@lean $($lean)?),
        };
    };
    (@servers) => { Servers::All };
    (@servers $servers:ident) => { Servers::$servers };
    (@lean) => { Lean::Always };
    (@lean $lean:expr) => { $lean };
}

/// A family file's entries: each `metric!` and the list `$list` of all of
/// them, in order, which [`super::METRICS`] is made of. An entry cannot be left out
/// of the list, so a family written in a family file is always rendered,
/// documented and checked.
macro_rules! family {
    ($list:ident; $(metric!($id:ident, $($entry:tt)*);)*) => {
        $(metric!($id, $($entry)*);)*
        /// This file's families, in the order they are rendered.
        pub(super) const $list: &[MetricDef] = &[$($id),*];
    };
}
