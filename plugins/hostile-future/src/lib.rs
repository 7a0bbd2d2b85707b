//! Test fixture: the extractor world of an imagined `agentforge:plugin@0.9.0`. Its
//! exports have today's shapes, but it imports the 0.9.0 `host` interface, which this
//! host does not define: loading must fail naming that version.

wit_bindgen::generate!({
    inline: "package agentforge:plugin@0.9.0;
        interface host {
            log: func(message: string);
        }
        interface types {
            enum action-result { success, failure, partial, skipped }
            enum fact-category { code-structure, inference, pattern, verification, error }
            record fact { category: fact-category, statement: string, confidence: f32, source: string }
        }
        world extractor {
            use types.{fact, action-result};
            import host;
            export handles: func() -> list<string>;
            export extract: func(tool: string, output: string, %result: action-result, step: u64) -> list<fact>;
        }",
    world: "agentforge:plugin/extractor@0.9.0",
});

struct Future;

impl Guest for Future {
    fn handles() -> Vec<String> {
        // Uses the 0.9.0 host, so the import stays in the component.
        agentforge::plugin::host::log("hello from 0.9.0");
        vec!["*".into()]
    }

    fn extract(
        _tool: String,
        _output: String,
        _result: agentforge::plugin::types::ActionResult,
        _step: u64,
    ) -> Vec<agentforge::plugin::types::Fact> {
        Vec::new()
    }
}

export!(Future);
