//! Test fixture: claims the 0.2.0 extractor contract but exports `extract` with another
//! signature (one string in, a list of strings out): loading must fail with a contract
//! mismatch, before any call.

wit_bindgen::generate!({
    inline: "package agentforge:plugin@0.2.0;
        world extractor {
            export handles: func() -> list<string>;
            export extract: func(tool: string) -> list<string>;
        }",
    world: "agentforge:plugin/extractor@0.2.0",
});

struct Wrong;

impl Guest for Wrong {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(tool: String) -> Vec<String> {
        vec![tool]
    }
}

export!(Wrong);
