//! The template parser: clusterctl's legacy-form rewrite, then drone/envsubst's grammar (text,
//! `$$` escapes, and `${...}` substitutions with their functions and nested defaults).

use super::TemplateError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Text(String),
    Func(Func),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Func {
    pub(super) param: String,
    pub(super) op: String,
    pub(super) args: Vec<Node>,
}

/// Rewrite the legacy `${ VAR }`, `${ VAR}`, `${VAR }` to `${VAR}` as clusterctl's
/// `convertLegacyVars` does (names of `[A-Za-z0-9_$]`, whitespace on at least one side).
fn convert_legacy(input: &str) -> String {
    let is_ws = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c');
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        if let Some(close) = after.find('}') {
            let inner = &after[..close];
            let trimmed = inner.trim_matches(is_ws);
            if trimmed.len() != inner.len() && !trimmed.is_empty() && trimmed.chars().all(is_name) {
                out.push_str("${");
                out.push_str(trimmed);
                out.push('}');
                rest = &after[close + 1..];
                continue;
            }
        }
        out.push('$');
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out
}

/// How deep `${...}` may nest inside one another (`${A:=${B:=${C}}}` is 3): the parser and the
/// evaluator recurse once per level, and thousands of levels overflowed the stack.
pub(crate) const MAX_NESTING: usize = 32;

pub(super) fn parse(template: &str) -> Result<Vec<Node>, TemplateError> {
    if template.len() > super::MAX_TEMPLATE_BYTES {
        return Err(TemplateError::TooLarge(format!(
            "the template is {} bytes; templates of more than {} MiB are refused",
            template.len(),
            super::MAX_TEMPLATE_BYTES >> 20
        )));
    }
    let converted = convert_legacy(template);
    let mut p = Parser {
        s: converted.chars().collect(),
        pos: 0,
        depth: 0,
    };
    p.parse_top().map_err(|(pos, message)| {
        let (line, column) = p.line_col(pos);
        TemplateError::Parse {
            line,
            column,
            message: message.to_string(),
        }
    })
}

type PResult<T> = Result<T, (usize, &'static str)>;

struct Parser {
    s: Vec<char>,
    pos: usize,
    /// How many `${` are open.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<char> {
        self.s.get(self.pos + off).copied()
    }

    fn at_lbrack(&self) -> bool {
        self.peek() == Some('$') && self.peek_at(1) == Some('{')
    }

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let mut line = 1;
        let mut col = 1;
        for c in self.s.iter().take(pos) {
            if *c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        (line, col)
    }

    fn parse_top(&mut self) -> PResult<Vec<Node>> {
        let mut nodes = Vec::new();
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if self.at_lbrack() {
                if !text.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut text)));
                }
                self.pos += 2;
                nodes.push(Node::Func(self.parse_func()?));
            } else if c == '$' && self.peek_at(1) == Some('$') {
                text.push('$');
                self.pos += 2;
            } else {
                text.push(c);
                self.pos += 1;
            }
        }
        if !text.is_empty() {
            nodes.push(Node::Text(text));
        }
        Ok(nodes)
    }

    fn ident(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            self.pos += 1;
        }
        self.s[start..self.pos].iter().collect()
    }

    fn expect_close(&mut self, message: &'static str) -> PResult<()> {
        if self.peek() == Some('}') {
            self.pos += 1;
            Ok(())
        } else {
            Err((self.pos, message))
        }
    }

    /// After `${`: one substitution, at most [`MAX_NESTING`] deep.
    fn parse_func(&mut self) -> PResult<Func> {
        if self.depth >= MAX_NESTING {
            return Err((self.pos, "substitutions nested more than 32 deep"));
        }
        self.depth += 1;
        let f = self.parse_func_inner();
        self.depth -= 1;
        f
    }

    fn parse_func_inner(&mut self) -> PResult<Func> {
        let start = self.pos;
        if self.peek() == Some('#') {
            return self.parse_length();
        }
        let param = self.ident();
        if param.is_empty() {
            return Err((start, "unable to parse variable name after ${"));
        }
        let mut f = Func {
            param,
            op: String::new(),
            args: vec![],
        };
        match self.peek() {
            Some('}') => {
                self.pos += 1;
            }
            Some(':') if matches!(self.peek_at(1), Some('=' | '-' | '?' | '+')) => {
                f.op = self.s[self.pos..self.pos + 2].iter().collect();
                self.pos += 2;
                self.parse_default_args(&mut f)?;
            }
            Some('=') => {
                f.op = "=".into();
                self.pos += 1;
                self.parse_default_args(&mut f)?;
            }
            Some(':') => self.parse_substring(&mut f)?,
            Some(',' | '^') => self.parse_case(&mut f)?,
            Some('/') => self.parse_replace(&mut f)?,
            Some(c @ ('#' | '%')) => self.parse_trim(&mut f, c)?,
            None => return Err((start.saturating_sub(2), "missing closing brace")),
            Some(_) => {
                return Err((
                    self.pos,
                    "missing closing brace (a variable name is letters, digits and _; defaults are written ${NAME:=value})",
                ));
            }
        }
        Ok(f)
    }

    /// `${#NAME}`, at the `#`.
    fn parse_length(&mut self) -> PResult<Func> {
        self.pos += 1;
        let param = self.ident();
        if param.is_empty() {
            return Err((
                self.pos,
                "bad substitution: expected a variable name after ${#",
            ));
        }
        self.expect_close("bad substitution: expected } after ${#NAME")?;
        Ok(Func {
            param,
            op: "#".into(),
            args: vec![],
        })
    }

    /// `${NAME:pos}` or `${NAME:pos:len}`, at the first `:`.
    fn parse_substring(&mut self, f: &mut Func) -> PResult<()> {
        f.op = ":".into();
        self.pos += 1;
        f.args.push(self.param(|c| c != ':' && c != '}', false)?);
        match self.peek() {
            Some('}') => self.pos += 1,
            Some(':') => {
                self.pos += 1;
                f.args.push(self.param(|c| c != '}', false)?);
                self.expect_close("bad substitution: expected } after ${NAME:pos:len")?;
            }
            _ => return Err((self.pos, "bad substitution in ${NAME:pos}")),
        }
        Ok(())
    }

    /// `${NAME,}`, `${NAME,,}`, `${NAME^}`, `${NAME^^}`.
    fn parse_case(&mut self, f: &mut Func) -> PResult<()> {
        let mut op = String::new();
        while op.len() < 2 && matches!(self.peek(), Some(',' | '^')) {
            op.push(self.s[self.pos]);
            self.pos += 1;
        }
        f.op = op;
        self.expect_close("bad substitution: expected } after a case conversion")
    }

    /// `${NAME/pattern/string}` and its `//`, `/#`, `/%` forms, at the first `/`.
    fn parse_replace(&mut self, f: &mut Func) -> PResult<()> {
        let mut op = "/".to_string();
        self.pos += 1;
        if let Some(c @ ('/' | '#' | '%')) = self.peek() {
            op.push(c);
            self.pos += 1;
        }
        f.op = op;
        f.args.push(self.param(|c| c != '/', true)?);
        if self.peek() != Some('/') {
            return Err((
                self.pos,
                "bad substitution: expected / in ${NAME/pattern/string}",
            ));
        }
        self.pos += 1;
        if self.peek() != Some('}') {
            f.args.push(self.param(|c| c != '}', true)?);
        }
        self.expect_close("bad substitution: expected } after ${NAME/pattern/string")
    }

    /// `${NAME#glob}`, `${NAME##glob}`, `${NAME%glob}`, `${NAME%%glob}`, at the first `c`.
    fn parse_trim(&mut self, f: &mut Func, c: char) -> PResult<()> {
        let mut op = String::new();
        while op.len() < 2 && self.peek() == Some(c) {
            op.push(c);
            self.pos += 1;
        }
        f.op = op;
        f.args.push(self.param(|c| c != '}', false)?);
        self.expect_close("bad substitution: expected } after a pattern")
    }

    fn parse_default_args(&mut self, f: &mut Func) -> PResult<()> {
        loop {
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(());
                }
                None => return Err((self.pos, "missing closing brace")),
                Some(_) => f.args.push(self.param(|c| c != '}', false)?),
            }
        }
    }

    /// One function argument: a nested `${...}` or a run of accepted characters.
    fn param(&mut self, accept: impl Fn(char) -> bool, escapes: bool) -> PResult<Node> {
        if self.at_lbrack() {
            self.pos += 2;
            return Ok(Node::Func(self.parse_func()?));
        }
        let mut text = String::new();
        let mut any = false;
        while let Some(c) = self.peek() {
            if self.at_lbrack() {
                break;
            }
            if escapes {
                let next = self.peek_at(1);
                if (c == '$' && next == Some('$'))
                    || (c == '\\' && matches!(next, Some('/' | '\\')))
                {
                    if let Some(n) = next {
                        text.push(n);
                    }
                    self.pos += 2;
                    any = true;
                    continue;
                }
            }
            if !accept(c) {
                break;
            }
            text.push(c);
            self.pos += 1;
            any = true;
        }
        if !any {
            return Err((
                self.pos,
                "unable to parse substitution within function (missing closing brace?)",
            ));
        }
        Ok(Node::Text(text))
    }
}
