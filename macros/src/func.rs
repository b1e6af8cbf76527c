//! The function model: which shapes `#[circuit_breaker]` accepts, and how the fallback is
//! called with the function's arguments.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

use crate::args::{Args, Errors};

/// The error for an item that is not a function with a body: a trait method without one, an
/// `impl` block, a struct, … (at the keyword that says what it is).
pub(crate) fn not_a_function(item: &TokenStream, parse_error: syn::Error) -> syn::Error {
    if let Some((name, receiver)) = bodiless_fn(item) {
        // A trait method, or a function declared in an `extern` block: without a receiver the
        // tokens do not tell which.
        let message = if receiver {
            "#[circuit_breaker] needs a function body to wrap: put it on the method in the \
             `impl` block, or give this trait method a default body"
        } else {
            "#[circuit_breaker] needs a function body to wrap: on a trait's function, put it on \
             the function in the `impl` block, or give it a default body; a function declared \
             in an `extern` block cannot be wrapped: put it on a Rust function that calls it"
        };
        return syn::Error::new(name, message);
    }
    let Ok(parsed) = syn::parse2::<syn::Item>(item.clone()) else {
        // Not an item syn can read, such as a function with a syntax error in its body: the
        // parse error points at the problem, not at the attribute.
        return parse_error;
    };
    let span = first_keyword_span(&parsed).unwrap_or_else(|| {
        item.clone()
            .into_iter()
            .find(|token| !matches!(token, TokenTree::Punct(p) if p.as_char() == '#'))
            .map_or_else(Span::call_site, |token| token.span())
    });
    let message = if matches!(parsed, syn::Item::Impl(_) | syn::Item::Trait(_)) {
        "#[circuit_breaker] goes on a function, not on a whole `impl` block or trait: put it on \
         each method that calls the service"
    } else {
        "#[circuit_breaker] goes on a function (`fn` or `async fn`), free or in an `impl` block"
    };
    syn::Error::new(span, message)
}

/// A function declared without a body (`fn name(…) -> T;`, in a trait or an `extern` block,
/// `safe fn` included): the span of its name, and whether it takes `self`.
fn bodiless_fn(item: &TokenStream) -> Option<(Span, bool)> {
    let tokens: Vec<TokenTree> = item.clone().into_iter().collect();
    if !matches!(tokens.last(), Some(TokenTree::Punct(p)) if p.as_char() == ';') {
        return None;
    }
    let at = tokens
        .iter()
        .position(|token| matches!(token, TokenTree::Ident(ident) if ident == "fn"))?;
    let Some(TokenTree::Ident(name)) = tokens.get(at + 1) else {
        return None;
    };
    let receiver = tokens[at + 2..].iter().any(|token| match token {
        TokenTree::Group(group) if group.delimiter() == proc_macro2::Delimiter::Parenthesis => {
            group
                .stream()
                .into_iter()
                .any(|token| matches!(token, TokenTree::Ident(ident) if ident == "self"))
        }
        _ => false,
    });
    Some((name.span(), receiver))
}

/// The span of the keyword that says what the item is (`struct`, `impl`, `mod`, …).
fn first_keyword_span(item: &syn::Item) -> Option<Span> {
    use syn::spanned::Spanned;
    Some(match item {
        syn::Item::Struct(item) => item.struct_token.span(),
        syn::Item::Enum(item) => item.enum_token.span(),
        syn::Item::Impl(item) => item.impl_token.span(),
        syn::Item::Mod(item) => item.mod_token.span(),
        syn::Item::Trait(item) => item.trait_token.span(),
        syn::Item::Const(item) => item.const_token.span(),
        syn::Item::Static(item) => item.static_token.span(),
        syn::Item::Type(item) => item.type_token.span(),
        syn::Item::Union(item) => item.union_token.span(),
        syn::Item::Use(item) => item.use_token.span(),
        _ => return None,
    })
}

/// Checks that the function can be wrapped, reporting each problem at the offending token.
pub(crate) fn check(item: &ItemFn, args: &Args, errors: &mut Errors) {
    let sig = &item.sig;
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new(
            constness.span(),
            "#[circuit_breaker] cannot wrap a `const fn`: a circuit breaker has run-time state; \
             remove `const`",
        ));
    }
    // `extern "Rust"` is the ABI of every Rust function, written out.
    if let Some(abi) = &sig.abi
        && abi.name.as_ref().is_none_or(|name| name.value() != "Rust")
    {
        errors.push(syn::Error::new(
            abi.span(),
            "#[circuit_breaker] cannot wrap an `extern` function: put it on a Rust function \
             that calls this one",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new(
            variadic.dots.span(),
            "#[circuit_breaker] cannot wrap a variadic function: put it on a Rust function \
             with a fixed list of arguments that calls this one",
        ));
    }
    if sig.asyncness.is_none() {
        if let Some(timeout) = &args.timeout {
            errors.push(syn::Error::new(
                timeout.key,
                "`timeout` needs an `async fn`: a synchronous call cannot be interrupted; make \
                 the function `async`, or remove `timeout` and bound the call inside it",
            ));
        }
        if let ReturnType::Type(_, ty) = &sig.output
            && returns_future(ty)
        {
            errors.push(syn::Error::new_spanned(
                ty,
                "#[circuit_breaker] on a function that returns a future would record the outcome \
                 when the future is created, not when it finishes: write an `async fn` instead \
                 (for traits, use native `async fn` in the trait rather than `#[async_trait]`)",
            ));
        }
    }
    if args.replay.is_some() {
        replay_shape(sig, errors);
    }
    declared_in_body(item, args, errors);
    if let Some(fallback) = &args.fallback {
        if calls_itself(&fallback.value, &sig.ident) {
            errors.push(syn::Error::new_spanned(
                &fallback.value,
                "the fallback is this function itself: while the breaker is open it would call \
                 itself again and again; name a function that answers without the service, \
                 such as one that reads a cache",
            ));
        }
        for arg in &sig.inputs {
            if let FnArg::Typed(typed) = arg
                && fallback_ident(&typed.pat).is_none()
            {
                errors.push(syn::Error::new_spanned(
                    &typed.pat,
                    "with `fallback`, every argument needs a name so it can be passed on to the \
                     fallback: write `name: Type` and destructure it in the body (`_name` if it \
                     is unused)",
                ));
            }
        }
    }
}

/// `fallback`, `classify` or `probe` naming a function declared in the body: the body is
/// wrapped, so its items are out of the scope the attribute's arguments are read in, and the
/// compiler would only say it cannot find the function.
fn declared_in_body(item: &ItemFn, args: &Args, errors: &mut Errors) {
    let local: Vec<&syn::Ident> = item
        .block
        .stmts
        .iter()
        .filter_map(|stmt| match stmt {
            syn::Stmt::Item(syn::Item::Fn(function)) => Some(&function.sig.ident),
            _ => None,
        })
        .collect();
    if local.is_empty() {
        return;
    }
    let fallback = if args.fallback_with_reason {
        "fallback_with_reason"
    } else {
        "fallback"
    };
    for (key, path) in [
        (fallback, &args.fallback),
        ("classify", &args.classify),
        ("probe", &args.probe),
    ] {
        let Some(path) = path else { continue };
        if let (None, Some(ident)) = (&path.value.qself, path.value.path.get_ident())
            && local.contains(&ident)
        {
            errors.push(syn::Error::new_spanned(
                ident,
                format!(
                    "`{key} = {ident}` names a function declared inside the body, which the \
                     attribute cannot reach (the body is wrapped); declare `{ident}` next to \
                     the function instead"
                ),
            ));
        }
    }
}

/// `replay` re-runs the body later, from a task, with the journaled arguments: it needs a
/// function of owned, named arguments only, with no `self` and no generic parameters.
fn replay_shape(sig: &syn::Signature, errors: &mut Errors) {
    const WHY: &str = "`replay` journals the arguments and runs the body again later, from a \
                       task of its own";
    if let Some(param) = sig.generics.params.first() {
        errors.push(syn::Error::new_spanned(
            param,
            format!("{WHY}: it needs a function without generic parameters (lifetimes included)"),
        ));
    }
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(receiver) => errors.push(syn::Error::new_spanned(
                receiver,
                format!(
                    "{WHY}, where there is no `self`: put it on a free function (or an \
                     associated function) that takes what the call needs as arguments"
                ),
            )),
            FnArg::Typed(typed) => {
                if let Some(cfg) = typed.attrs.iter().find(|a| a.path().is_ident("cfg")) {
                    errors.push(syn::Error::new_spanned(
                        cfg,
                        format!(
                            "{WHY}: an argument under `#[cfg]` cannot be journaled; take it \
                             unconditionally (an `Option` if it may be absent)"
                        ),
                    ));
                } else if fallback_ident(&typed.pat).is_none() {
                    errors.push(syn::Error::new_spanned(
                        &typed.pat,
                        format!("{WHY}: every argument needs a name, `name: Type`"),
                    ));
                } else if matches!(&*typed.ty, Type::ImplTrait(_)) {
                    errors.push(syn::Error::new_spanned(
                        &typed.ty,
                        format!(
                            "{WHY}: an `impl Trait` argument cannot be journaled; name its type"
                        ),
                    ));
                }
            }
        }
    }
}

/// `fallback = name` or `fallback = Self::name` where `name` is the function itself.
fn calls_itself(fallback: &syn::ExprPath, name: &syn::Ident) -> bool {
    let segments: Vec<&syn::Ident> = fallback
        .path
        .segments
        .iter()
        .map(|segment| &segment.ident)
        .collect();
    fallback.qself.is_none()
        && match segments.as_slice() {
            [only] => *only == name,
            [first, last] => *first == "Self" && *last == name,
            _ => false,
        }
}

/// `impl Future<…>` or `Pin<Box<dyn Future<…>>>` (what `#[async_trait]` produces).
fn returns_future(ty: &Type) -> bool {
    fn names_future(
        bounds: &syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>,
    ) -> bool {
        bounds.iter().any(|bound| match bound {
            syn::TypeParamBound::Trait(bound) => bound
                .path
                .segments
                .last()
                .is_some_and(|segment| segment.ident == "Future"),
            _ => false,
        })
    }
    match ty {
        Type::ImplTrait(ty) => names_future(&ty.bounds),
        Type::TraitObject(ty) => names_future(&ty.bounds),
        Type::Group(ty) => returns_future(&ty.elem),
        Type::Paren(ty) => returns_future(&ty.elem),
        Type::Path(path) => path.path.segments.last().is_some_and(|segment| {
            (segment.ident == "Pin" || segment.ident == "Box") && match &segment.arguments {
                syn::PathArguments::AngleBracketed(args) => args.args.iter().any(
                    |arg| matches!(arg, syn::GenericArgument::Type(inner) if returns_future(inner)),
                ),
                _ => false,
            }
        }),
        _ => false,
    }
}

/// The name an argument is passed to the fallback by: `x` in `x: T` or `mut x: T`.
fn fallback_ident(pat: &Pat) -> Option<&syn::Ident> {
    match pat {
        Pat::Ident(ident) if ident.by_ref.is_none() && ident.subpat.is_none() => Some(&ident.ident),
        _ => None,
    }
}

/// The arguments of the fallback call: `self` for a method, then each argument by name.
///
/// Each name keeps its own hygiene (so it resolves to the user's parameter even when the
/// function comes out of a `macro_rules!`) but is located at the fallback path, so that a
/// mismatch with the fallback's signature points at `fallback = …`.
pub(crate) fn fallback_args(item: &ItemFn, at: Span) -> Vec<TokenStream> {
    item.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Receiver(receiver) => {
                let token = syn::Ident::new("self", receiver.self_token.span().located_at(at));
                Some(token.into_token_stream())
            }
            FnArg::Typed(typed) => fallback_ident(&typed.pat).map(|ident| {
                let mut ident = ident.clone();
                ident.set_span(ident.span().located_at(at));
                // A parameter under `#[cfg]` is passed under the same `#[cfg]` (call arguments
                // take it): configured out, it is neither a parameter nor an argument.
                let cfgs = typed
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"));
                quote!(#(#cfgs)* #ident)
            }),
        })
        .collect()
}

/// The return type with every `impl Trait` replaced by `_` (`()` for none), usable as a `let`
/// type hint.
///
/// The hint fixes the type of the body's result before the generated code inspects it
/// (`?` inside the wrapped body needs it); `impl Trait` is not allowed in a `let`
/// (tracing #1227, async-trait #281), `_` is.
pub(crate) fn type_hint(output: &ReturnType) -> Option<Type> {
    struct EraseImplTrait;
    impl VisitMut for EraseImplTrait {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(impl_trait) = ty {
                *ty = Type::Infer(syn::TypeInfer {
                    attrs: Vec::new(),
                    underscore_token: syn::Token![_](impl_trait.impl_token.span()),
                });
            } else {
                syn::visit_mut::visit_type_mut(self, ty);
            }
        }
    }
    match output {
        // `()`, said: a body that diverges (`todo!()`, a `loop` without `break`) leaves its
        // type open otherwise, and a fallback's classification would take it for a `Result`.
        ReturnType::Default => Some(syn::parse_quote!(())),
        ReturnType::Type(_, ty) => {
            let mut ty = (**ty).clone();
            EraseImplTrait.visit_type_mut(&mut ty);
            Some(ty)
        }
    }
}

/// Where errors about the return type point: the type, or the name of a `fn` without one.
pub(crate) fn output_anchor(item: &ItemFn) -> TokenStream {
    match &item.sig.output {
        ReturnType::Type(_, ty) => ty.to_token_stream(),
        ReturnType::Default => item.sig.ident.to_token_stream(),
    }
}

#[cfg(test)]
mod tests {
    use super::{returns_future, type_hint};
    use quote::quote;
    use syn::{ReturnType, Type, parse_quote};

    #[test]
    fn erases_impl_trait() {
        let output: ReturnType = parse_quote!(-> Result<impl Iterator<Item = u8>, E>);
        let hint = type_hint(&output).unwrap();
        assert_eq!(quote!(#hint).to_string(), quote!(Result<_, E>).to_string());
    }

    #[test]
    fn detects_futures() {
        let ty: Type = parse_quote!(impl core::future::Future<Output = u8>);
        assert!(returns_future(&ty));
        let ty: Type = parse_quote!(Pin<Box<dyn Future<Output = u8> + Send + 'async_trait>>);
        assert!(returns_future(&ty));
        let ty: Type = parse_quote!(Result<impl Display, E>);
        assert!(!returns_future(&ty));
    }
}
