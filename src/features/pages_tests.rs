//! The paging edge against an in-memory apiserver that pages as
//! kube-apiserver does ([`super::super::fake_apiserver`]).

use super::*;
use crate::features::fake_apiserver::{client, pods, Apiserver};
use kube::api::DynamicObject;
use std::sync::Arc;

/// The pod names `fold` saw, and how many pages brought them.
async fn names(server: &Arc<Apiserver>) -> Result<(Vec<String>, usize), ClusterError> {
    let api: Api<DynamicObject> = Api::all_with(
        client(server),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    fold(
        &api,
        "pods (v1)",
        || (Vec::new(), 0),
        |(names, pages), items| {
            *pages += 1;
            names.extend(items.into_iter().filter_map(|p| p.metadata.name));
            Ok(())
        },
    )
    .await
}

fn expected(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("pod-{i:05}")).collect()
}

#[tokio::test]
async fn three_pages_of_500_give_what_one_whole_list_gives_each_asked_with_limit_500() {
    let paged = Arc::new(Apiserver::new(pods(1_200, 0)));
    let (seen, pages) = names(&paged).await.expect("listed");
    assert_eq!(seen, expected(1_200));
    assert_eq!(pages, 3);
    assert_eq!(
        paged.pod_lists(),
        [
            "GET /api/v1/pods?&limit=500",
            "GET /api/v1/pods?&limit=500&continue=500",
            "GET /api/v1/pods?&limit=500&continue=1000",
        ]
    );
    // An apiserver that ignores limit (served from its watch cache) sends
    // all at once: the same objects.
    let whole = Arc::new(Apiserver {
        one_page: true,
        ..Apiserver::new(pods(1_200, 0))
    });
    assert_eq!(names(&whole).await.expect("listed"), (expected(1_200), 1));
    assert_eq!(whole.pod_lists(), ["GET /api/v1/pods?&limit=500"]);
}

#[tokio::test]
async fn an_expired_token_on_the_second_page_restarts_the_list_once_from_the_start() {
    let server = Arc::new(Apiserver {
        expire: [1].into(),
        ..Apiserver::new(pods(1_200, 0))
    });
    let (seen, pages) = names(&server).await.expect("listed after one restart");
    // The first page before the restart is not counted twice.
    assert_eq!(seen, expected(1_200));
    assert_eq!(pages, 3);
    assert_eq!(
        server.pod_lists(),
        [
            "GET /api/v1/pods?&limit=500",
            "GET /api/v1/pods?&limit=500&continue=500",
            "GET /api/v1/pods?&limit=500",
            "GET /api/v1/pods?&limit=500&continue=500",
            "GET /api/v1/pods?&limit=500&continue=1000",
        ]
    );
}

#[tokio::test]
async fn a_second_expired_token_fails_the_list_and_returns_no_pages() {
    let server = Arc::new(Apiserver {
        expire: [1, 3].into(),
        ..Apiserver::new(pods(1_200, 0))
    });
    match names(&server).await {
        Err(ClusterError::Expired { what }) => assert_eq!(what, "pods (v1)"),
        other => panic!("expected Expired, got {other:?}"),
    }
    assert_eq!(server.pod_lists().len(), 4);
}

#[tokio::test]
async fn another_error_fails_the_list_at_once_naming_it() {
    // No such resource here: 404, not retried.
    let api: Api<DynamicObject> = Api::all_with(
        client(&Arc::new(Apiserver::new(Vec::new()))),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
    );
    match all(&api, "nodes (v1)").await {
        Err(ClusterError::List { what, source }) => {
            assert_eq!(what, "nodes (v1)");
            assert!(crate::store::presence::is_not_served(&source), "{source}");
        }
        other => panic!("expected a List error, got {other:?}"),
    }
}
